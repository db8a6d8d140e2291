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


class ClickModel(codesign.QualityModel):
    """A stand-in click model: a request is a click when it wants row 0, and its logit is 1 when
    row 0 is fetched (0 otherwise), so every layout that misses row 0 loses AUC."""

    metric = "auc"

    def __init__(self, validation, noise=0.0):
        self.validation = validation
        self.noise = noise  # a second "seed" scores slightly differently
        self.calls = 0

    def targets(self):
        return [1.0 if 0 in r else 0.0 for r in self.validation]

    def score(self, examples, missing):
        self.calls += 1
        return [(1.0 if 0 in self.validation[e] and 0 not in m else 0.0) + self.noise * e
                for e, m in zip(examples, missing)]


GRID = {"hot_fractions": [0, 0.25], "hot_bins": [1], "hot_rounds": [1, 2], "cold_bins": [1, 2],
        "cold_rounds": [1, 3], "colocations": [0, 1]}


def test_sweep_with_python_models_reports_intervals_and_picks_a_point(tmp_path):
    prof = codesign.profile(REQUESTS, 8, top_k=2)
    models = [ClickModel(REQUESTS), ClickModel(REQUESTS, noise=0.01)]
    seen = []
    frame = codesign.sweep(prof, 4, REQUESTS, grid=GRID, model=models, bootstrap=50,
                           out=str(tmp_path), name="tiny",
                           progress=lambda stage, done, total: seen.append((stage, done, total)))
    attrs = codesign._attrs(frame)
    assert attrs["metric"] == "auc" and attrs["seeds"] == 2
    assert attrs["tolerance"] == pytest.approx(0.005)  # AUC's default margin
    assert attrs["reachable_policy"] == "all" and attrs["unseen_rows_policy"] == "default"
    assert attrs["reference"]["low"] <= attrs["reference_quality"] <= attrs["reference"]["high"]
    assert len(attrs["reference_per_seed"]) == 2 and attrs["worth"]["value"] > 0
    assert isinstance(attrs["claim_note"], str) and len(attrs["chosen_per_seed"]) == 2
    # 8 baseline-shaped points (no hot table: hot bins and rounds do not vary) + 16 with one.
    assert len(_column(frame, "quality")) == 24 and all(m.calls > 0 for m in models)
    assert all(isinstance(stage, str) for stage, _, _ in seen)
    assert seen[-1][1] == seen[-1][2]
    for low, value, high in zip(_column(frame, "loss_ci_low"), _column(frame, "loss"),
                                _column(frame, "loss_ci_high")):
        assert low <= value <= high
    assert all(len(p) == 2 for p in _column(frame, "preserved_per_seed"))
    assert all(_column(frame, "reachable"))
    chosen = attrs["chosen"]
    assert chosen >= 0 and _column(frame, "chosen")[chosen]
    assert _column(frame, "preserved")[chosen]
    assert _column(frame, "loss_ci_high")[chosen] <= attrs["tolerance"]
    csv = (tmp_path / "sweep-tiny.csv").read_text().splitlines()
    assert csv[0].startswith("hot_fraction,hot_bins") and ",auc," in csv[0] and len(csv) == 25
    assert '"chosen"' in attrs["summary_json"]
    # The sweep's threads call the models under the GIL: the same figures with two threads.
    again = codesign.sweep(prof, 4, REQUESTS, grid=GRID, model=models, bootstrap=50, threads=2)
    assert _column(again, "loss_ci_high") == _column(frame, "loss_ci_high")


def test_sweep_reachability_policy():
    prof = codesign.profile(REQUESTS, 8, top_k=2)
    grid = {"hot_fractions": [0.25], "hot_bins": [1], "hot_rounds": [1], "cold_bins": [2],
            "cold_rounds": [0, 1], "colocations": [0]}
    every_row = codesign.sweep(prof, 4, REQUESTS, grid=grid, bootstrap=50)
    assert _column(every_row, "cold_rounds") == [1]
    opt_in = codesign.sweep(prof, 4, REQUESTS, grid=grid, bootstrap=50,
                            allow_unreachable_rows=True)
    attrs = codesign._attrs(opt_in)
    assert _column(opt_in, "cold_rounds") == [0, 1] and attrs["reachable_policy"] == "opt-in"
    assert _column(opt_in, "reachable") == [False, True]
    assert _column(opt_in, "unreachable_client_share")[0] > 0


def test_sweep_without_model_and_errors():
    prof = codesign.profile(REQUESTS, 8)
    small = {"hot_fractions": [0], "hot_rounds": [1], "cold_bins": [2], "cold_rounds": [2],
             "colocations": [0], "hot_bins": [1]}
    frame = codesign.sweep(prof, 4, REQUESTS, grid=small, bootstrap=50)
    assert codesign._attrs(frame)["metric"] == "fetched_share"
    assert _column(frame, "quality") == pytest.approx(_column(frame, "fetched_share"))
    with pytest.raises(veil.InvalidArgumentError, match="unknown grid key"):
        codesign.sweep(prof, 4, REQUESTS, grid={"bins": [1]})
    with pytest.raises(veil.InvalidArgumentError, match="unseen"):
        codesign.sweep(prof, 4, REQUESTS, grid=small, unseen_rows="sometimes")

    class Broken(ClickModel):
        def score(self, examples, missing):
            raise RuntimeError("model exploded")

    with pytest.raises(RuntimeError, match="model exploded"):
        codesign.sweep(prof, 4, REQUESTS, grid=small, model=Broken(REQUESTS), threads=2)

    class Short(ClickModel):
        def score(self, examples, missing):
            return [0.0]

    with pytest.raises(veil.InvalidArgumentError, match="1 outcomes"):
        codesign.sweep(prof, 4, REQUESTS, grid=small, model=Short(REQUESTS))

    class Shares(ClickModel):
        metric = "rows_fetched"

    with pytest.raises(veil.InvalidArgumentError, match="auc"):
        codesign.sweep(prof, 4, REQUESTS, grid=small, model=Shares(REQUESTS))


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
    assert len(workload.validation_clients) == len(workload.validation_requests)
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
    points = codesign.sweep(prof, 4, REQUESTS, grid=small, bootstrap=50)
    assert points["cold_rounds"] == [1, 2] and points["attrs"]["metric"] == "fetched_share"
