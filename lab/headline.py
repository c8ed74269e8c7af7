"""The proof page's opening sentence: the key number of the run it shows, in plain words."""

from __future__ import annotations

from .models import LabLane, LabRun

# How the sentence names a product's take and its supply.
WORDS = {
    LabRun.Product.VOUCHER: "{taken} orders were taken for {supplied} units",
    LabRun.Product.POOL: "draws won {taken} prizes from a pool of {supplied}",
}


def headline(run: LabRun | None) -> str:
    """What ``run`` showed, as a newcomer first wants it: the most an unsafe strategy that broke
    took against its supply, then what the safe strategies took ("exactly" the supply only
    when every one of them held and took exactly it). Built from its finished lanes on one row; "" for no
    run or a run with none."""
    if run is None:
        return ""
    lanes = [lane for lane in run.lanes.all() if lane.status == LabLane.Status.DONE and lane.buckets == 1]
    # An unsafe lane counts where it broke as its verdict expects: one that did not reproduce
    # the race shows nothing a guard prevents.
    unsafe = [lane for lane in lanes if lane.expected_to_break and lane.ok]
    safe = [lane for lane in lanes if not lane.expected_to_break]
    words = WORDS[run.product]
    parts = []
    if unsafe:
        worst = max(unsafe, key=lambda lane: lane.taken - lane.supplied)
        parts.append("without a working guard, " + words.format(taken=worst.taken, supplied=worst.supplied))
    if safe:
        parts.append(_safe_part(safe, words, alone=not unsafe))
    if not parts:
        return ""
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def _safe_part(safe: list[LabLane], words: str, *, alone: bool) -> str:
    """What the safe strategies took: "exactly" only when each took exactly its supply and its
    verdict held, else the range they took and how many did not hold (the sentence does not
    round a miss away: a duplicate order or a lost confirmation leaves the count exact)."""
    supplied = {lane.supplied for lane in safe}
    supply = supplied.pop() if len(supplied) == 1 else None
    failed = sum(1 for lane in safe if not lane.ok)
    if not failed and all(lane.taken == lane.supplied for lane in safe):
        amount, who = (f"exactly {supply}" if supply is not None else "exactly its supply"), "every safe strategy"
    else:
        low, high = min(lane.taken for lane in safe), max(lane.taken for lane in safe)
        amount, who = (f"{low}" if low == high else f"{low} to {high}"), "the safe strategies"
    said = f"with {who}, " + words.format(taken=amount, supplied=supply) if alone and supply is not None else None
    said = said or f"with {who}, {amount}"
    if failed:
        said += f" ({failed} of {len(safe)} not shown to hold)"
    return said
