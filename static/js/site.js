// On every page of the site (base.html).
(function () {
  // A page restored whole from the back/forward cache shows its state as it was when it was
  // left (stock, buttons) until its next poll: load it again. The pages are sent with
  // Cache-Control: no-store, so a Back without that cache fetches them afresh anyway.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) window.location.reload();
  });

  // A form with data-confirm asks before it is sent; "{choice}" in the question is the
  // value of its select (the strategy to switch to).
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    const select = form.querySelector("select");
    const question = form.dataset.confirm.replace("{choice}", select ? select.value : "");
    if (!window.confirm(question)) event.preventDefault();
  });
})();
