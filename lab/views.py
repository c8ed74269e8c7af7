"""The race lab (staff) and the public proof page."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import staff_permission_required
from accounts.permissions import staff_holds
from core.csp import csp_replace, policy
from core.errors import DomainError
from inventory.strategies import strategy_names
from inventory.texts import described
from loadtests.scenarios import SURGES

from .charts import bucket_chart, lane_chart
from .execute import lab_dir
from .forms import LabRunForm, scenarios_by_product, scenarios_explained
from .headline import headline
from .models import LabRun
from .selectors import (
    lab_run_active,
    lab_run_get,
    lab_run_list,
    lab_run_proof,
    lab_run_proof_bucketed,
    lab_run_proof_surge,
)
from .services import lab_run_cancel, lab_run_create, lab_run_publish

# The report is a file the load-test runner writes, with its stylesheet inline and no script.
REPORT_POLICY = policy(default_src="'none'", script_src="'none'", style_src="'unsafe-inline'", form_action="'none'")

# Reading the lab takes any of its permissions; starting a run adds one, cancelling changes one.
LAB_READ = ("lab.view_labrun", "lab.add_labrun", "lab.change_labrun")
LAB_START = "lab.add_labrun"
LAB_CANCEL = "lab.change_labrun"


# The page of a lane's fresh item, which shows what it sold or awarded beyond its stock.
ITEM_PAGES = {LabRun.Product.VOUCHER: "pages:voucher_detail", LabRun.Product.POOL: "lottery:pool_detail"}


def _lanes(run: LabRun) -> list[dict]:
    """Each lane with its charts and its item's page, for the lane cards: in a bucketed run,
    its units left per bucket beside its orders."""
    return [
        {
            "lane": lane,
            "chart": lane_chart(lane, duration=run.duration),
            "buckets": bucket_chart(lane, duration=run.duration) if run.bucketed else None,
            "item_url": reverse(ITEM_PAGES[run.product], args=[lane.item_id]) if lane.item_id else "",
        }
        for lane in run.lanes.all()
    ]


@staff_permission_required(*LAB_READ)
@require_http_methods(["GET", "POST"])
def lab_page(request):
    """The form, the run going on (live) and the past runs."""
    if request.method == "POST" and not staff_holds(request.user, LAB_START):
        # A run sends a crowd at this server and creates its users and tokens.
        raise PermissionDenied
    form = LabRunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = lab_run_create(user=request.user, **form.cleaned_data)
        except DomainError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("lab:run", run_id=run.pk)
    active = lab_run_active()
    context = {
        "form": form,
        "active": active,
        "lanes": _lanes(active) if active else [],
        "runs": lab_run_list(),
        "race_window_ms": settings.RACE_WINDOW_MS,
        "scenarios": scenarios_by_product(),
        "scenarios_explained": scenarios_explained(),
    }
    return render(request, "lab/lab.html", context, status=422 if form.errors else 200)


@staff_permission_required(*LAB_READ)
@require_GET
def lab_run_page(request, run_id: int):
    run = lab_run_get(run_id=run_id)
    return render(request, "lab/run.html", {"run": run, "lanes": _lanes(run)})


@staff_permission_required(LAB_CANCEL)
@require_POST
def lab_run_cancel_view(request, run_id: int):
    lab_run_cancel(run=lab_run_get(run_id=run_id), user=request.user)
    return redirect("lab:run", run_id=run_id)


@staff_permission_required(*LAB_READ)
@require_GET
def lab_run_live(request, run_id: int):
    """The lane cards (and with ``?full=1`` the matrix and parameters of the run's own page),
    polled every second while the run is going on."""
    run = lab_run_get(run_id=run_id)
    return render(request, "lab/_live.html", {"run": run, "lanes": _lanes(run), "full": "full" in request.GET})


@staff_permission_required(LAB_CANCEL)
@require_POST
def lab_run_publish_view(request, run_id: int):
    """Put a finished run on /proof/ (changing which run the proof shows takes the change permission)."""
    try:
        lab_run_publish(run=lab_run_get(run_id=run_id), user=request.user)
    except DomainError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain; charset=utf-8")
    return redirect("lab:run", run_id=run_id)


@staff_permission_required(*LAB_READ)
@require_GET
@csp_replace(REPORT_POLICY)
def lab_run_report(request, run_id: int):
    """The run's full HTML report (the same page ``make loadtest`` writes)."""
    run = lab_run_get(run_id=run_id)
    report = lab_dir(run) / "report.html"
    if not report.is_file():
        raise Http404("This run has no report (it has not finished, or it failed).")
    # The runner writes the same page for `make loadtest`, where there is no lab to go back
    # to: the lab adds its way back as it serves it, to reports written before this too.
    back = (
        '<nav class="back" data-testid="report-back">'
        f'<a href="{reverse("lab:run", args=[run.pk])}">&larr; Run {run.pk}</a> · '
        f'<a href="{reverse("lab:lab")}">Race lab</a></nav>'
    )
    page = report.read_text(encoding="utf-8").replace("<body>", f"<body>\n{back}", 1)
    return HttpResponse(page, content_type="text/html; charset=utf-8")


@staff_permission_required(*LAB_READ)
@require_GET
def lab_run_locust_report(request, run_id: int, lane: str):
    """A lane's Locust report (``lane``: its key, the strategy and any buckets), as a download:
    Locust's own page runs its own scripts, which this site's pages do not serve from its origin."""
    run = lab_run_get(run_id=run_id)
    if lane not in {each.key for each in run.lanes.all()}:
        raise Http404("This run has no such strategy.")
    report = lab_dir(run) / lane / "locust.html"
    if not report.is_file():
        raise Http404("This strategy has no Locust report (it did not run).")
    return FileResponse(report.open("rb"), as_attachment=True, filename=f"lab-run-{run.pk}-{lane}-locust.html")


@require_GET
def proof_page(request):
    """Public: each product's proof (``lab_run_proof``), its latest bucketed run beside it
    (``lab_run_proof_bucketed``), the latest surge at the take and through the waiting room
    side by side (``lab_run_proof_surge``), a summary of them first, and what each strategy
    does and costs."""
    proofs = []
    for product, label in LabRun.Product.choices:
        run = lab_run_proof(product=product)
        held = lab_run_proof(product=product, lifecycle=True)
        split = lab_run_proof_bucketed(product=product)
        proofs.append(
            {
                "product": product,
                "label": label,
                "run": run,
                "lanes": _lanes(run) if run else [],
                "lifecycle": held,
                "lifecycle_lanes": _lanes(held) if held else [],
                "bucketed": split,
                "bucketed_lanes": _lanes(split) if split else [],
            }
        )
    surge_runs = [lab_run_proof_surge(scenario=scenario) for scenario in SURGES]
    surges = [{"run": run, "lanes": _lanes(run)} for run in surge_runs if run is not None]
    strategies = [described(name) for name in strategy_names()]
    # With no run at all the summary would only say "no run yet" above the sections that say it.
    summary = any(proof["run"] or proof["lifecycle"] or proof["bucketed"] for proof in proofs)
    # The opening sentence tells the flash sale's run, or the prize draw's where the sale has none.
    opening = next((text for text in (headline(proof["run"]) for proof in proofs) if text), "")
    context = {"proofs": proofs, "surges": surges, "strategies": strategies, "summary": summary, "headline": opening}
    return render(request, "lab/proof.html", context)
