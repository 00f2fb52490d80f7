#!/usr/bin/env python3
"""Export the offensive-language model of the PyPI package alt-profanity-check
for runtime/domain/live/classifier/linear.

The package ships a scikit-learn TfidfVectorizer (word unigrams, English stop
words dropped, l2-normalised TF-IDF) and a CalibratedClassifierCV of five
LinearSVCs with sigmoid calibration. This script writes what the Go port needs
to reproduce its predict_prob exactly, as gzipped TSV:

    # provenance lines
    cal <a> <b> <intercept>        one line per calibrated LinearSVC
    <word> <idf> <w1> ... <w5>     one line per vocabulary word

and a golden file of texts with the package's own scores, which the Go test
compares against. With --olid DIR (the OLID v1.0 files: testset-levela.tsv,
labels-levela.csv) it prints precision and recall of the package's model on
that held-out set (OLID was not among the package's training data).

    python3 -m venv /tmp/v && /tmp/v/bin/pip install alt-profanity-check==1.9.1
    /tmp/v/bin/python hack/live/export_profanity_model.py runtime/domain/live/classifier/linear [--olid DIR]
"""
import argparse
import csv
import gzip
import json
import os
import sys
from importlib import metadata, resources

import joblib

GOLDEN = [
    "you are a wonderful person",
    "what a great stream, thanks!",
    "fuck you idiot",
    "this is shit",
    "go kill yourself",
    "I love this song so much",
    "you stupid piece of garbage",
    "hello from Brazil",
    "lol that was close",
    "the referee is an asshole",
    "",
    "Ünïcödé wörds and CAPS SHOUTING",
    "damn that's good",
    "shut up you moron, nobody asked",
    "ok ok ok ok ok",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--olid")
    args = ap.parse_args()
    data = resources.files("profanity_check") / "data"
    vec = joblib.load(data / "vectorizer.joblib")
    model = joblib.load(data / "model.joblib")
    p = vec.get_params()
    assert p["ngram_range"] == (1, 1) and p["norm"] == "l2" and p["lowercase"] and p["use_idf"] and not p["sublinear_tf"], p
    assert p["token_pattern"] == r"(?u)\b\w\w+\b", p["token_pattern"]
    cals = model.calibrated_classifiers_
    version = metadata.version("alt-profanity-check")
    path = os.path.join(args.out, "model.tsv.gz")
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write(f"# alt-profanity-check {version} (PyPI; MIT licence): TfidfVectorizer + CalibratedClassifierCV(LinearSVC, sigmoid)\n")
        f.write("# exported by hack/live/export_profanity_model.py\n")
        for c in cals:
            assert c.method == "sigmoid" and len(c.calibrators) == 1
            cal = c.calibrators[0]
            f.write(f"cal\t{float(cal.a_)!r}\t{float(cal.b_)!r}\t{float(c.estimator.intercept_[0])!r}\n")
        inv = sorted(vec.vocabulary_.items(), key=lambda kv: kv[1])
        for word, i in inv:
            ws = "\t".join(f"{float(c.estimator.coef_[0][i]):.7g}" for c in cals)
            f.write(f"{word}\t{vec.idf_[i]:.7g}\t{ws}\n")
    probs = model.predict_proba(vec.transform(GOLDEN))[:, 1]
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump([{"text": t, "score": float(s)} for t, s in zip(GOLDEN, probs)], f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(inv)} words, {len(cals)} calibrated models)")
    if args.olid:
        texts, ids = [], []
        with open(os.path.join(args.olid, "testset-levela.tsv"), encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                ids.append(row["id"])
                texts.append(row["tweet"])
        gold = {}
        with open(os.path.join(args.olid, "labels-levela.csv"), encoding="utf-8") as f:
            for row in csv.reader(f):
                gold[row[0]] = row[1] == "OFF"
        scores = model.predict_proba(vec.transform(texts))[:, 1]
        for th in (0.5, 0.8, 0.9):
            tp = sum(1 for i, s in zip(ids, scores) if s >= th and gold[i])
            fp = sum(1 for i, s in zip(ids, scores) if s >= th and not gold[i])
            fn = sum(1 for i, s in zip(ids, scores) if s < th and gold[i])
            print(f"OLID level A test ({len(ids)} tweets, {sum(gold.values())} offensive), threshold {th}: "
                  f"precision {tp / max(tp + fp, 1):.3f} recall {tp / max(tp + fn, 1):.3f}")


if __name__ == "__main__":
    sys.exit(main())
