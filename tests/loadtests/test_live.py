"""The live figures the race lab reads from Locust's stats history while a run goes on."""

from __future__ import annotations

from loadtests.locust_process import locust_now

HEADER = "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,95%,Total Request Count\n"


def test_nothing_written_yet_reads_zero(tmp_path):
    assert locust_now(tmp_path / "locust") == (0.0, 0.0)
    (tmp_path / "locust_stats_history.csv").write_text(HEADER + "100,0,,Aggregated,0,0,N/A,N/A,0\n")
    assert locust_now(tmp_path / "locust") == (0.0, 0.0)


def test_requests_per_second_follow_the_total_over_the_last_two_seconds(tmp_path):
    rows = [
        "100,40,,Aggregated,0,0,500,930,29\n",
        "101,40,GET,/api/x,0,0,500,930,29\n",  # an endpoint's row: not the aggregate
        "101,40,,Aggregated,0,0,900,1300,61\n",
        "102,40,,Aggregated,5,0,1100,1300,95\n",
        "103,40,,Aggregated,18,0,400,1200,256\n",
    ]
    (tmp_path / "locust_stats_history.csv").write_text(HEADER + "".join(rows))
    rps, p95 = locust_now(tmp_path / "locust")
    # (256 - 61) requests from t=101 to t=103, where Locust's own figure still says 18.
    assert rps == (256 - 61) / 2
    assert p95 == 1200
