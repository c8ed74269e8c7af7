// On every page of the site (base.html).
(function () {
  // A page restored whole from the back/forward cache shows its state as it was when it was
  // left (stock, buttons) until its next poll: load it again. The pages are sent with
  // Cache-Control: no-store, so a Back without that cache fetches them afresh anyway.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) window.location.reload();
  });

  // htmx swaps only 2xx answers: a press (a post: Buy, Draw, Pay, Join...) answered otherwise
  // said nothing, its button enabled again as if nothing had been asked. Its target says what
  // came back instead. A poll (a get) that fails keeps what it shows until the next one.
  function pressFailed(event, words) {
    const config = event.detail.requestConfig;
    const target = event.detail.target;
    const pressed = event.detail.elt;
    if (!config || config.verb !== "post" || !target) return;
    const said = document.createElement("p");
    said.className = "outcome bad";
    said.dataset.testid = "press-failed";
    said.textContent = words;
    if (target.tagName === "BUTTON" || target.querySelector("button")) {
      // A held record's block (its Pay, Cancel or Claim, its countdown) or a button swapping
      // nothing: the words go beside the button pressed, and all it held stays to press again.
      const earlier = pressed.nextElementSibling;
      if (earlier && earlier.dataset.testid === "press-failed") earlier.remove();
      pressed.insertAdjacentElement("afterend", said);
    } else {
      target.replaceChildren(said);  // an outcome's empty place (Buy's, Draw's)
    }
  }

  document.addEventListener("htmx:responseError", function (event) {
    const answer = event.detail.xhr;
    const wait = answer.getResponseHeader("Retry-After");
    const later = wait ? "try again in " + wait + " s." : "try again shortly.";
    const words = {
      403: "This was refused: reload the page, and log in again if asked.",
      404: "Not found: it may have ended or been taken down; reload the page.",
      429: "Too many tries just now: " + later,
      503: "A service this needs does not answer: " + later,
    };
    pressFailed(event, words[answer.status] || "Something went wrong (" + answer.status + "): " + later);
  });

  document.addEventListener("htmx:sendError", function (event) {
    pressFailed(event, "No answer from the server: check the connection and try again.");
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
