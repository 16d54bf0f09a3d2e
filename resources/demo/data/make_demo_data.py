#!/usr/bin/env python3
"""Generates the demo data sets in this folder (standard library only, fixed seed).

A synthetic task a ~1M-parameter model learns visibly within a minute on two CPU cores: short
deterministic transformations with one right answer each.

  reverse   "Reverse the word." / "plant"        -> "tnalp"
  sort      "Sort the digits." / "5 2 9 1"       -> "1 2 5 9"
  add       "Add the numbers." / "37 + 45"       -> "82"
  upper     "Uppercase the word." / "river"      -> "RIVER"

Outputs (rerun to regenerate; the files are committed):
  demo_sft.json             alpaca, a JSON array with one row per line      (demo_sft)
  demo_sft_sharegpt.jsonl   sharegpt from/value conversations, 1-2 turns    (demo_sft_sharegpt)
  demo_dpo.jsonl            alpaca preference pairs: chosen right, rejected
                            a plausible wrong answer                        (demo_dpo)
  demo_pt.jsonl             plain texts for stage pt (LLaMA-Factory's pre-training form,
                            "columns": {"prompt": "text"}): each a few worked examples
                            written as prose                                (demo_pt)
  demo_kto.jsonl            alpaca rows for stage kto, one answer each with a "label": true
                            for a right answer (desirable), false for a plausible wrong one
                            (LLaMA-Factory's kto_tag column)                (demo_kto)
  dataset_info.json         the five entries
"""
import json
import os
import random

SEED = 20240611
SFT_ROWS = 2000
SHAREGPT_ROWS = 1000
DPO_ROWS = 1000
PT_ROWS = 400
KTO_ROWS = 1000

WORDS = """
able acid aged also area army away baby back ball band bank base bath bear beat bell belt bird
blue boat body bone book born boss both bowl burn busy cake call calm camp card care cart case
cash cast cell chip city clay club coal coat code cold cook cool copy corn cost crew crop dark
data date dawn deal deep desk diet dish door down draw drop drum dust duty earn east easy edge
farm fast fear file film fire fish flag flat flow food foot fork form fuel game gate gift girl
glad goal gold golf good gray grow hair half hall hand hard harm head heat help hero high hill
home hope horn host hour idea iron item jazz join jump keen keep kick kind king kite lake lamp
land lane leaf lion list load lock long loop lord loud love luck mail main mark mask meal milk
mind mint moon nest note oven pace page pain pair palm park path peak pear pine plan plant river
stone cloud train apple bread chair grass light music ocean paper quiet sugar table water zebra
tiger lemon mango candy piano radio robot salad shelf spoon storm
""".split()

TASKS = {
    "reverse": "Reverse the word.",
    "sort": "Sort the digits.",
    "add": "Add the numbers.",
    "upper": "Uppercase the word.",
}


def make_example(rng):
    """Returns (task, input, right answer, plausible wrong answer)."""
    task = rng.choice(sorted(TASKS))
    if task == "reverse":
        word = rng.choice([w for w in WORDS if 3 <= len(w) <= 6])
        right = word[::-1]
        wrong = word[-1] + word[:-1] if word[-1] + word[:-1] != right else word
        return task, word, right, wrong
    if task == "sort":
        digits = [rng.randrange(10) for _ in range(rng.randint(3, 6))]
        right = " ".join(str(d) for d in sorted(digits))
        wrong_digits = sorted(digits)
        i = rng.randrange(len(wrong_digits) - 1)
        wrong_digits[i], wrong_digits[i + 1] = wrong_digits[i + 1], wrong_digits[i]
        wrong = " ".join(str(d) for d in wrong_digits)
        if wrong == right:
            wrong = " ".join(str(d) for d in digits[::-1]) + " 0"
        return task, " ".join(str(d) for d in digits), right, wrong
    if task == "add":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return task, f"{a} + {b}", str(a + b), str(a + b + rng.choice([-10, -1, 1, 10]))
    word = rng.choice(WORDS)
    return task, word, word.upper(), word[0].upper() + word[1:]


def write_json_array(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
        f.write("\n]\n")


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(SEED)

    sft = []
    for _ in range(SFT_ROWS):
        task, arg, right, _ = make_example(rng)
        sft.append({"instruction": TASKS[task], "input": arg, "output": right})

    sharegpt = []
    for _ in range(SHAREGPT_ROWS):
        turns = []
        for _ in range(rng.choice([1, 1, 2])):
            task, arg, right, _ = make_example(rng)
            turns.append({"from": "human", "value": f"{TASKS[task]}\n{arg}"})
            turns.append({"from": "gpt", "value": right})
        sharegpt.append({"conversations": turns})

    dpo = []
    for _ in range(DPO_ROWS):
        task, arg, right, wrong = make_example(rng)
        dpo.append({"instruction": TASKS[task], "input": arg, "chosen": right, "rejected": wrong})

    # Its own generator, so that adding it left the other files as they were.
    pt_rng = random.Random(SEED + 1)
    pt = []
    for _ in range(PT_ROWS):
        sentences = []
        for _ in range(pt_rng.randint(2, 6)):
            task, arg, right, _ = make_example(pt_rng)
            sentences.append(f"{TASKS[task][:-1]}: {arg} gives {right}.")
        pt.append({"text": " ".join(sentences)})

    # Its own generator too: about 60% desirable rows.
    kto_rng = random.Random(SEED + 2)
    kto = []
    for _ in range(KTO_ROWS):
        task, arg, right, wrong = make_example(kto_rng)
        good = kto_rng.random() < 0.6
        kto.append({"instruction": TASKS[task], "input": arg, "output": right if good else wrong,
                    "label": good})

    write_json_array(os.path.join(here, "demo_sft.json"), sft)
    write_jsonl(os.path.join(here, "demo_sft_sharegpt.jsonl"), sharegpt)
    write_jsonl(os.path.join(here, "demo_dpo.jsonl"), dpo)
    write_jsonl(os.path.join(here, "demo_pt.jsonl"), pt)
    write_jsonl(os.path.join(here, "demo_kto.jsonl"), kto)
    info = {
        "demo_sft": {"file_name": "demo_sft.json"},
        "demo_sft_sharegpt": {
            "file_name": "demo_sft_sharegpt.jsonl",
            "formatting": "sharegpt",
            "columns": {"messages": "conversations"},
            "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt"},
        },
        "demo_dpo": {
            "file_name": "demo_dpo.jsonl",
            "ranking": True,
            "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"},
        },
        "demo_pt": {"file_name": "demo_pt.jsonl", "columns": {"prompt": "text"}},
        "demo_kto": {
            "file_name": "demo_kto.jsonl",
            "columns": {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "label"},
        },
    }
    with open(os.path.join(here, "dataset_info.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(info, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
