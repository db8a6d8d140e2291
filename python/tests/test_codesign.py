"""veil.codesign: profiles, layouts, simulations and sweeps over the training_tools library, with
a Python quality model."""

import pytest

import veil
from veil import codesign

REQUESTS = [[0, 1, 2], [0, 1], [0, 3], [1, 2, 4], [0, 1, 5], [6]]


def _column(frame, name):
    return list(frame[name])


def test_profile_counts_rows_and_pairs():
    prof = codesign.profile(REQUESTS, 8, top_k=2)
    assert _column(prof, "frequency") == [4, 4, 2, 1, 1, 1, 1, 0]
    assert _column(prof, "co_accessed")[0] == [1]  # 0 and 1 are seen together three times
    assert _column(prof, "co_accessed")[2] == [1]  # seen with 1 twice, with 0 once (noise)
    assert codesign._attrs(prof)["num_requests"] == 6


def test_layout_and_simulation():
    prof = codesign.profile(REQUESTS, 8, top_k=2)
    layout = codesign.layout(prof, 4, hot_fraction=0.25, hot_bins=1, hot_rounds=2, cold_bins=2,
                             cold_rounds=1, colocation=1, seed=3)
    assert sorted(layout.hot_rows) == [0, 1] and layout.num_rows == 8
    sim = codesign.simulate(layout, REQUESTS, backend_words_per_s=1e9)
    assert sim["keys"] == layout.cost()["keys"] == 4
    assert 0 < sim["fetched_share"] <= 1 and len(sim["missing"]) == len(REQUESTS)
    assert sim["latency_ms"] == pytest.approx(sim["words_scanned"] / 1e9 * 1e3)
    wanted = sum(len(set(r)) for r in REQUESTS)
    assert sim["fetched_share"] == pytest.approx(1 - sum(map(len, sim["missing"])) / wanted)
    with pytest.raises(veil.InvalidArgumentError):
        codesign.layout(prof, 4, colocation=99)


class FetchedRows(codesign.QualityModel):
    """Quality = rows fetched out of the validation's wanted rows: a stand-in for a model."""

    metric = "rows_fetched"

    def __init__(self, validation):
        self.wanted = sum(len(set(r)) for r in validation)
        self.calls = 0

    def evaluate(self, missing):
        self.calls += 1
        return self.wanted - sum(len(m) for m in missing)

    def preserved(self, quality, reference):
        return quality >= reference - 1


def test_sweep_with_a_python_model_writes_csv_and_picks_a_point(tmp_path):
    prof = codesign.profile(REQUESTS, 8, top_k=2)
    grid = {"hot_fractions": [0, 0.25], "hot_bins": [1], "hot_rounds": [1, 2], "cold_bins": [1, 2],
            "cold_rounds": [1, 3], "colocations": [0, 1]}
    model = FetchedRows(REQUESTS)
    seen = []
    frame = codesign.sweep(prof, 4, REQUESTS, grid=grid, model=model, out=str(tmp_path),
                           name="tiny", progress=lambda done, total: seen.append((done, total)))
    attrs = codesign._attrs(frame)
    assert attrs["metric"] == "rows_fetched" and attrs["reference_quality"] == model.wanted
    # 8 baseline-shaped points (no hot table: hot bins and rounds do not vary) + 16 with one.
    assert len(_column(frame, "quality")) == 24 and model.calls == 24 + 2
    assert seen[-1] == (24, 24)
    chosen = attrs["chosen"]
    assert chosen >= 0 and _column(frame, "chosen")[chosen]
    assert _column(frame, "preserved")[chosen]
    csv = (tmp_path / "sweep-tiny.csv").read_text().splitlines()
    assert csv[0].startswith("hot_fraction,hot_bins") and len(csv) == 25
    assert '"chosen"' in attrs["summary_json"]


def test_sweep_without_model_and_errors():
    prof = codesign.profile(REQUESTS, 8)
    small = {"hot_fractions": [0], "hot_rounds": [1], "cold_bins": [2], "cold_rounds": [2],
             "colocations": [0], "hot_bins": [1]}
    frame = codesign.sweep(prof, 4, REQUESTS, grid=small)
    assert codesign._attrs(frame)["metric"] == "fetched_share"
    assert _column(frame, "quality") == _column(frame, "fetched_share")
    with pytest.raises(veil.InvalidArgumentError, match="unknown grid key"):
        codesign.sweep(prof, 4, REQUESTS, grid={"bins": [1]})

    class Broken(FetchedRows):
        def evaluate(self, missing):
            raise RuntimeError("model exploded")

    with pytest.raises(RuntimeError, match="model exploded"):
        codesign.sweep(prof, 4, REQUESTS, grid=small, model=Broken(REQUESTS))


def test_workload_from_an_interaction_log(tmp_path):
    lines = ["user,item,timestamp,rating"]
    for user in range(6):
        for t in range(8):
            lines.append(f"u{user},i{(user * 3 + t) % 10},{t},{1 + (user + t) % 5}")
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    workload = codesign.load_workload(interactions=str(tmp_path / "log.csv"),
                                      label_column="rating", history=4, dim=8)
    assert workload.kind == "recommendation" and workload.num_rows == 10
    assert workload.row_words == 8
    assert len(workload.train_requests) > len(workload.validation_requests) > 0
    samples = workload.samples(True)
    assert len(samples["items"]) == len(workload.validation_requests)
    assert samples["offsets"][0] == 0
    with pytest.raises(veil.NotFoundError):
        codesign.load_workload(interactions=str(tmp_path / "none.csv"))
    with pytest.raises(veil.InvalidArgumentError):
        codesign.load_workload()


def test_plain_python_data_without_pandas(monkeypatch):
    monkeypatch.setattr(codesign, "_pd", None)
    prof = codesign.profile(REQUESTS, 8, top_k=2)
    assert isinstance(prof, dict) and prof["frequency"][:2] == [4, 4]
    assert prof["attrs"] == {"num_requests": 6}
    layout = codesign.layout(prof, 4, hot_fraction=0.25, hot_bins=1, hot_rounds=2, cold_bins=2,
                             cold_rounds=1, colocation=1, seed=3)
    assert sorted(layout.hot_rows) == [0, 1]
    small = {"hot_fractions": [0], "hot_rounds": [1], "cold_bins": [2], "cold_rounds": [1, 2],
             "colocations": [0], "hot_bins": [1]}
    points = codesign.sweep(prof, 4, REQUESTS, grid=small)
    assert points["cold_rounds"] == [1, 2] and points["attrs"]["metric"] == "fetched_share"
