// The time left to pay for or claim each held record on the page (templates/inventory/_deadline.html).
// It counts from the seconds the server said were left when it rendered the record, so the
// browser's clock does not matter; records swapped in later by htmx are found at the next tick.
// At zero it raises "deadline" on the record's fragment, which asks the server what became of it.
(function () {
  const due = new WeakMap();

  function fmt(ms) {
    const s = Math.ceil(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60);
    const mm = h ? String(m).padStart(2, "0") : String(m);
    return (h ? h + ":" : "") + mm + ":" + String(s % 60).padStart(2, "0");
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll("[data-seconds-left]").forEach(function (label) {
      if (!due.has(label)) due.set(label, now + Number(label.dataset.secondsLeft) * 1000);
      const left = due.get(label) - now;
      if (left > 0) {
        label.textContent = fmt(left) + " left";
      } else if (!label.dataset.ended) {
        label.dataset.ended = "true";
        label.textContent = "time is up";
        label.dispatchEvent(new CustomEvent("deadline", { bubbles: true }));
      }
    });
  }

  tick();
  setInterval(tick, 1000);
  document.addEventListener("htmx:load", tick);
})();
