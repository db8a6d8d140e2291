#!/usr/bin/env python3
"""A MovieLens recommendation model in PyTorch whose embedding rows are fetched privately.

Run it after the README's set-up (scripts/setup fetches MovieLens, scripts/build builds veil):

    PYTHONPATH=build/python /usr/bin/python3 examples/movielens_private_model.py

Steps, each a cell of a notebook:
  1. load MovieLens (veil.codesign.load_workload: the last 20% of each user's ratings are
     validation; one inference = the user's 20 most recent earlier movies + a candidate movie);
  2. train a small model in plain PyTorch: an EmbeddingBag over the history (mean) and the
     candidate's row, an MLP predicting "rating >= 4";
  3. co-design a layout from the training requests (hot table of the popular movies, bins,
     one key per bin) and simulate what it fetches;
  4. build the servers' table from the trained weight (fp32, arranged by the layout), start two
     veil-server processes on loopback with TLS;
  5. evaluate the model privately: the same model with veil.PrivateEmbeddingBag in place of its
     table, one private request per inference, and check that it scores exactly what the
     plaintext model scores with the same missing rows replaced by the default row.
"""

import argparse
import os
import tempfile
import time

import torch

import veil


def auc(scores, labels):
    """Area under the ROC curve (rank statistic; ties get the mean rank)."""
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    for value in torch.unique(scores):
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    positives = labels > 0.5
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class Recommender(torch.nn.Module):
    """Mean of the history's rows, the candidate's row, their product, the user's mean rating."""

    def __init__(self, rows, dim):
        super().__init__()
        self.table = torch.nn.EmbeddingBag(rows, dim, mode="mean")
        self.mlp = torch.nn.Sequential(torch.nn.Linear(3 * dim + 1, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))

    def head(self, history, item, mean_rating):
        return self.mlp(torch.cat([history, item, history * item, mean_rating], 1)).squeeze(1)

    def forward(self, batch):
        history = self.table(batch["history"], batch["offsets"])
        item = self.table(batch["items"].unsqueeze(1))
        return self.head(history, item, batch["mean_rating"])


def to_batches(samples):
    """The samples as tensors, and one dict of tensors per inference."""
    history = torch.from_numpy(samples["history"])
    offsets = torch.from_numpy(samples["offsets"])
    ratings = torch.from_numpy(samples["history_labels"])
    ends = torch.cat([offsets[1:], torch.tensor([len(history)])])
    sizes = ends - offsets
    sample = torch.repeat_interleave(torch.arange(len(offsets)), sizes)
    sums = torch.zeros(len(offsets)).index_add_(0, sample, ratings)
    mean_rating = sums / sizes.clamp(min=1) / 5
    return {"history": history, "offsets": offsets, "ends": ends,
            "items": torch.from_numpy(samples["items"]),
            "mean_rating": mean_rating.unsqueeze(1),
            "labels": torch.from_numpy(samples["labels"])}


def select(batch, index):
    """Samples `index` (a range) of a batch, offsets rebased."""
    start, stop = index.start, index.stop
    first, last = int(batch["offsets"][start]), int(batch["ends"][stop - 1])
    return {"history": batch["history"][first:last],
            "offsets": batch["offsets"][start:stop] - first,
            "ends": batch["ends"][start:stop] - first,
            "items": batch["items"][start:stop],
            "mean_rating": batch["mean_rating"][start:stop],
            "labels": batch["labels"][start:stop]}


def train(model, batch, epochs, seed):
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    n = len(batch["items"])
    for epoch in range(epochs):
        permutation = torch.randperm(n)
        total = 0.0
        for start in range(0, n, 1024):
            chosen = permutation[start:start + 1024]
            sub = gather(batch, chosen)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(sub), sub["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss) * len(chosen)
        print(f"  epoch {epoch + 1}: loss {total / n:.4f}")


def gather(batch, chosen):
    """Samples `chosen` (a tensor of indices) of a batch, as one batch."""
    starts, ends = batch["offsets"][chosen], batch["ends"][chosen]
    sizes = ends - starts
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]])
    positions = torch.repeat_interleave(starts - offsets, sizes) + torch.arange(int(sizes.sum()))
    return {"history": batch["history"][positions], "offsets": offsets, "ends": offsets + sizes,
            "items": batch["items"][chosen], "mean_rating": batch["mean_rating"][chosen],
            "labels": batch["labels"][chosen]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=veil.codesign.DEFAULT_DATA_DIR)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--private-inferences", type=int, default=300)
    parser.add_argument("--work-dir", default=None, help="keeps the table and layout there")
    args = parser.parse_args()
    torch.set_num_threads(2)

    print("1. MovieLens")
    workload = veil.codesign.load_workload("movielens", data_dir=args.data_dir, dim=args.dim)
    train_batch = to_batches(workload.samples(False))
    valid_batch = to_batches(workload.samples(True))
    print(f"  {workload.num_rows} movies, {len(train_batch['items'])} training and "
          f"{len(valid_batch['items'])} validation inferences")

    print("2. training in PyTorch")
    model = Recommender(workload.num_rows, args.dim)
    train(model, train_batch, args.epochs, seed=1)
    model.eval()
    with torch.no_grad():
        reference = auc(model(valid_batch), valid_batch["labels"])
    print(f"  validation AUC, every row on the device: {reference:.4f}")

    print("3. co-design: a layout from the training requests")
    profile = veil.codesign.profile(workload.train_requests, workload.num_rows, top_k=4)
    layout = veil.codesign.layout(profile, args.dim, hot_fraction=0.2, hot_bins=64, hot_rounds=1,
                                  cold_bins=16, cold_rounds=1, colocation=0, seed=1)
    simulation = veil.codesign.simulate(layout, workload.validation_requests)
    print(f"  {layout}")
    print(f"  simulated: {simulation['fetched_share']:.1%} of the wanted rows fetched, "
          f"{simulation['keys']} keys and {simulation['bytes_per_inference']} bytes per inference")

    scratch = None if args.work_dir else tempfile.TemporaryDirectory(prefix="veil-example-")
    work = args.work_dir or scratch.name
    os.makedirs(work, exist_ok=True)
    table_path = os.path.join(work, "movielens.veil")
    layout.write(os.path.join(work, "movielens.layout"))
    weight = model.table.weight.detach()
    digest = veil.table.build(weight, format="fp32", path=table_path, layout=layout, epoch=1)
    print(f"4. table {table_path} ({layout.physical_rows} x {layout.entry_words} fp32, "
          f"digest {digest[:16]}...), two servers with TLS")

    default_row = weight.mean(0)
    count = min(args.private_inferences, len(valid_batch["items"]))
    with veil.local_servers(table_path, tls=True) as servers:
        client = servers.client()
        bag = veil.PrivateEmbeddingBag.from_client(client, layout, mode="mean",
                                                   default_row=default_row)
        private_scores, plain_scores, missing_rows = [], [], 0
        started = time.monotonic()
        with torch.no_grad():
            for i in range(count):
                one = select(valid_batch, range(i, i + 1))
                fetched = bag.fetch(torch.cat([one["history"], one["items"]]))
                history = bag.pool(fetched, one["history"], one["offsets"]).output
                item = bag.embed(fetched, one["items"])
                private_scores.append(model.head(history, item, one["mean_rating"]))
                # The plaintext model with the same rows replaced: what the device must match.
                replaced = weight.clone()
                replaced[fetched.missing_rows] = default_row
                plain_history = torch.nn.functional.embedding_bag(one["history"], replaced,
                                                                  one["offsets"], mode="mean")
                plain_scores.append(model.head(plain_history, replaced[one["items"]],
                                               one["mean_rating"]))
                missing_rows += len(fetched.missing_rows)
        seconds = time.monotonic() - started
        stats = client.stats(0)
    private = torch.cat(private_scores)
    plain = torch.cat(plain_scores)
    labels = valid_batch["labels"][:count]
    with torch.no_grad():
        all_rows = model(select(valid_batch, range(0, count)))
    print(f"5. {count} private inferences in {seconds:.2f} s "
          f"({1e3 * seconds / count:.1f} ms each, {bag.keys_per_inference} keys per server, "
          f"{bag.last_call()['bytes_up'] + bag.last_call()['bytes_down']} bytes on the wire); "
          f"server 0 answered {stats['keys']} keys")
    print(f"  private scores equal the plaintext model's with the same rows missing: "
          f"{torch.equal(private, plain)}")
    print(f"  AUC on these {count}: private {auc(private, labels):.4f}, every row "
          f"{auc(all_rows, labels):.4f}; {missing_rows} rows replaced by the default row")
    if scratch is not None:
        scratch.cleanup()
    if not torch.equal(private, plain):
        raise SystemExit("private inference differs from the plaintext model")


if __name__ == "__main__":
    main()
