// A prize just won and held shows its Claim in the outcome, under the Draw button; its line in
// "My draws" below would say "You won ... Claim" a second time. That line is hidden while the
// outcome shows the same draw held, and is back once the outcome moves on (claimed, forfeited)
// or a reload empties it. Checked again after each swap: the standing reloads every 2 s.
(function () {
  function heldIn(root) {
    return root.querySelector('[data-outcome="held"][data-draw]');
  }

  function hideRepeats() {
    const shown = heldIn(document.getElementById("outcome") || document.createElement("div"));
    document.querySelectorAll(".my-draws > li").forEach(function (line) {
      const held = heldIn(line);
      line.hidden = Boolean(shown && held && held.dataset.draw === shown.dataset.draw);
    });
  }

  hideRepeats();
  document.addEventListener("htmx:load", hideRepeats);
  document.addEventListener("htmx:afterSettle", hideRepeats);
})();
