// Counts down to the start (or the end) of each sale window on the page, from the server's times.
(function () {
  function fmt(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return (d ? d + "d " : "") + String(h).padStart(2, "0") + ":" + String(m).padStart(2, "0") + ":" + String(s % 60).padStart(2, "0");
  }
  document.querySelectorAll(".window[data-begin][data-end]").forEach(function (box) {
    const label = box.querySelector(".countdown");
    const begin = Date.parse(box.dataset.begin), end = Date.parse(box.dataset.end);
    function tick() {
      const now = Date.now();
      if (now < begin) label.textContent = "Starts in " + fmt(begin - now);
      else if (now < end) label.textContent = "Live: ends in " + fmt(end - now);
      else label.textContent = "Ended";
    }
    tick();
    setInterval(tick, 1000);
  });
})();
