"""bench/page_tccg.py's summaries, which the performance pages print above their runs: the table
over measured runs (a row per dtype and thread count) and the table over tunes (a row per dtype and
build), each from runs whose answers are known here, a later run's cases replacing an earlier
one's; and a page made from the repository's own tune data carries the tunes' table alone, above
the runs' sections."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import page_tccg  # noqa: E402


def tune(case, walls, rss, footprint, not_measured=0):
    rounds = [{"wall_s": w, "rss_mib": rss, "candidates": 20, "probed": 20,
               "measured": 20 - not_measured, "not_measured": not_measured,
               "time_limit_reached": not_measured > 0, "best": {"strategy": "tensor_gemm"},
               "standalone": {"winner_s": 0.1}} for w in walls]
    return {"case": case, "einsum": "ab,bc->ac", "footprint_mib": footprint, "rounds": rounds}


def tune_run(dtype, build, tunes):
    return {"dtype": dtype, "einsumdb": f"/var/tmp/{build}/", "tunes": tunes}


def measured(case, roofline, view, contiguous):
    return {"case": case, "roofline": roofline, "numpy_view": view,
            "numpy_contiguous": contiguous}


def test_tune_summary_takes_each_case_worst_round_and_later_runs_replace_cases():
    first = tune_run("f32", "build-a", [
        tune(1, [20.0, 61.5, 30.0], rss=300, footprint=100),        # one round past 60 s
        tune(2, [10.0, 11.0, 12.0], rss=350, footprint=100),        # 3.5 times the footprint
        tune(3, [40.0, 41.0, 42.0], rss=250, footprint=100, not_measured=2)])
    again = tune_run("f32", "build-a", [tune(1, [25.0, 26.0, 27.0], rss=200, footprint=100)])
    other = tune_run("f64", "build-b", [tune(5, [5.0], rss=100, footprint=100)])
    header, rule, *rows = page_tccg.tune_summary_lines([first, again, other])
    assert header.startswith("| tunes | cases |") and rule.count("|") == header.count("|")
    assert rows == [
        "| f32, build-a | 1-3 | 42.0 (3) | 3 of 3 | 3.50 (2) | 2 of 3 | 3 |",
        "| f64, build-b | 5 | 5.0 (5) | 1 of 1 | 1.00 (5) | 1 of 1 | none |"]
    # Without the later run, case 1's round past the limit counts.
    _, _, row = page_tccg.tune_summary_lines([first])
    assert row == "| f32, build-a | 1-3 | 61.5 (1) | 2 of 3 | 3.50 (2) | 2 of 3 | 3 |"


def test_run_summary_on_the_medians_with_later_runs_replacing_cases():
    first = {"dtype": "f64", "threads": 1, "cases": [
        measured(1, [0.9, 0.7, 0.75], [2.0, 2.0, 2.0], [2.5, 2.5, 2.5]),  # median 0.75: below
        measured(2, [0.5, 0.5, 0.5], [0.9, 0.8, 1.2], [1.0, 1.1, 1.2])]}  # numpy's view faster
    again = {"dtype": "f64", "threads": 1, "cases": [
        measured(2, [1.0, 0.9, 0.8], [1.5, 1.5, 1.5], [1.6, 1.6, 1.6])]}
    _, _, row = page_tccg.summary_lines([first, again])
    assert row == ("| f64, 1 thread | 0.82, 0.75 | 1 of 2 | 1.73, 1.50 | 1.60 | 1 | none |")
    _, _, row = page_tccg.summary_lines([first])
    assert row == ("| f64, 1 thread | 0.61, 0.50 | 0 of 2 | 1.34, 0.90 | 1.10 | 1-2 | 2 |")


def test_run_summary_takes_the_batched_product_beside_numbered_cases():
    # (tccg.py --batched: its case is named "bmm"; a row may hold it and TCCG's numbered cases)
    runs = {"dtype": "c64", "threads": 1, "cases": [
        measured(3, [0.7], [2.0], [2.5]), measured("bmm", [0.6], [0.9], [1.0]),
        measured(1, [0.9], [3.0], [3.5]), measured(2, [0.5], [1.5], [1.6])]}
    _, _, row = page_tccg.summary_lines([runs])
    assert row == ("| c64, 1 thread | 0.66, 0.50 | 1 of 4 | 1.69, 0.90 | 1.00 | 2-3, bmm | bmm |")


def test_runs_with_a_real_operand_have_rows_of_their_own():
    # (tccg.py --real A: the same dtype and threads as a run of complex operands alone)
    both = {"dtype": "c64", "threads": 1, "cases": [measured(1, [0.5], [2.0], [2.5])]}
    a_real = {"dtype": "c64", "real": "A", "threads": 1,
              "cases": [measured(1, [0.9], [3.0], [3.5])]}
    _, _, row_both, row_a = page_tccg.summary_lines([both, a_real])
    assert row_both.startswith("| c64, 1 thread | 0.50, 0.50 |")
    assert row_a.startswith("| c64, A real, 1 thread | 0.90, 0.90 |")


def test_summaries_of_runs_of_the_other_kind_are_empty():
    tunes = tune_run("f32", "build-a", [tune(1, [20.0], rss=300, footprint=100)])
    runs = {"dtype": "f64", "threads": 1, "cases": [measured(1, [0.9], [2.0], [2.5])]}
    assert page_tccg.summary_lines([tunes]) == []
    assert page_tccg.tune_summary_lines([runs]) == []
    assert [page_tccg.times(n) for n in (1, 2, 3)] == ["once", "twice", "3 times"]


def test_page_from_the_tune_cost_data_has_the_tunes_table(tmp_path):
    data = os.path.join(ROOT, "docs", "performance", "data")
    runs = [os.path.join(data, f) for f in ("tune-f32-zen5.json", "tune-f64-zen5.json")]
    out = tmp_path / "page.md"
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "page_tccg.py"), str(out), *runs,
                    "--title", "Tunes", "--summary"], check=True)
    text = out.read_text()
    assert "| f32, einsumdb-s36c | 1-8, 34, 43 |" in text
    assert "| f64, einsumdb-s36c | 1-8, 31, 34, 43 |" in text
    # Tunes only: no table of measured runs, and a section per run after the summary.
    assert "/ roofline" not in text
    assert text.index("| tunes |") < text.index("## Tuning, f32") < text.index("## Tuning, f64")
    assert text.count("Each case tuned 3 times") == 2
    with open(runs[0]) as f:  # a row per case in its run's section
        cases = [t["case"] for t in json.load(f)["tunes"]]
    section = text[text.index("## Tuning, f32"):text.index("## Tuning, f64")]
    assert all(f"\n| {c} | " in section for c in cases)
