// The race lab's form.
(function () {
  "use strict";

  // The scenario list offers only the chosen product's scenarios, and falls back to that
  // product's first one (its crowd) when the scenario chosen belongs to the other product.
  function offerScenarios(form, scenarios) {
    var chosen = form.querySelector("input[name=product]:checked");
    var select = form.querySelector("select[name=scenario]");
    if (!chosen || !select) {
      return;
    }
    var mine = scenarios[chosen.value] || [];
    Array.prototype.forEach.call(select.options, function (option) {
      var offered = mine.indexOf(option.value) !== -1;
      option.hidden = !offered;
      option.disabled = !offered;
    });
    Array.prototype.forEach.call(select.querySelectorAll("optgroup"), function (group) {
      group.hidden = !group.querySelector("option:not([hidden])");
    });
    if (mine.indexOf(select.value) === -1 && mine.length) {
      select.value = mine[0];
    }
    explain(form, mine, select.value);
  }

  // Beside the list, what the chosen product's scenarios prove, the chosen one marked.
  function explain(form, mine, value) {
    var entries = form.querySelectorAll(".scenarios-explained [data-scenario]");
    Array.prototype.forEach.call(entries, function (entry) {
      var name = entry.getAttribute("data-scenario");
      entry.hidden = mine.indexOf(name) === -1;
      entry.classList.toggle("chosen", name === value);
    });
  }

  function start() {
    var form = document.querySelector("[data-testid=lab-form]");
    var data = document.getElementById("lab-scenarios");
    if (!form || !data) {
      return;
    }
    var scenarios = JSON.parse(data.textContent);
    form.addEventListener("change", function (event) {
      if (event.target.name === "product" || event.target.name === "scenario") {
        offerScenarios(form, scenarios);
      }
    });
    offerScenarios(form, scenarios);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
