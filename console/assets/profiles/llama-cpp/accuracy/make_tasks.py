"""Writes tasks.jsonl: the llama.cpp profile's accuracy task set (run it to regenerate).

Every item is made here, from templates and facts written for this file (arithmetic,
world capitals, English antonyms, plurals, ordered sequences), so the set is ours to ship.
Each prompt is a short few-shot pattern whose answer is one word or number; a greedy
continuation is scored by its first line (console.core.decisions.accuracy.is_correct). The kinds are
chosen so a 270M model gets some right and some wrong: a broken engine then loses items.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

CAPITALS = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Egypt", "Cairo"), ("Peru", "Lima"),
    ("Norway", "Oslo"), ("Greece", "Athens"), ("Russia", "Moscow"), ("Canada", "Ottawa"),
    ("Australia", "Canberra"), ("Turkey", "Ankara"), ("Morocco", "Rabat"), ("Brazil", "Brasilia"),
    ("India", "New Delhi"), ("Nigeria", "Abuja"),
    ("Mongolia", "Ulaanbaatar"), ("Kazakhstan", "Astana"), ("Nepal", "Kathmandu"), ("Laos", "Vientiane"),
    ("Senegal", "Dakar"), ("Mali", "Bamako"), ("Zambia", "Lusaka"), ("Uruguay", "Montevideo"),
    ("Paraguay", "Asuncion"), ("Latvia", "Riga"), ("Lithuania", "Vilnius"), ("Estonia", "Tallinn"),
    ("Slovakia", "Bratislava"), ("Croatia", "Zagreb"), ("Serbia", "Belgrade"), ("Bulgaria", "Sofia"),
    ("Romania", "Bucharest"), ("Albania", "Tirana"), ("Jordan", "Amman"), ("Syria", "Damascus"),
    ("Afghanistan", "Kabul"), ("Pakistan", "Islamabad"), ("Tanzania", "Dodoma"), ("Uganda", "Kampala"),
    ("Rwanda", "Kigali"), ("Angola", "Luanda"), ("Tunisia", "Tunis"), ("New Zealand", "Wellington"),
    ("Switzerland", "Bern"), ("Ecuador", "Quito"), ("Honduras", "Tegucigalpa"), ("Iceland", "Reykjavik"),
]
ANTONYMS = [
    ("up", "down"), ("open", "closed"), ("early", "late"), ("full", "empty"), ("light", "dark"),
    ("fast", "slow"), ("happy", "sad"), ("rich", "poor"), ("young", "old"), ("wet", "dry"),
    ("strong", "weak"), ("high", "low"), ("long", "short"), ("thick", "thin"), ("loud", "quiet"),
    ("hard", "soft"), ("clean", "dirty"), ("first", "last"), ("win", "lose"), ("push", "pull"),
    ("buy", "sell"), ("inside", "outside"), ("above", "below"), ("true", "false"), ("cheap", "expensive"),
    ("north", "south"), ("east", "west"), ("before", "after"), ("day", "night"), ("love", "hate"),
][::2]
PLURALS = [
    ("mouse", "mice"), ("foot", "feet"), ("tooth", "teeth"), ("man", "men"), ("woman", "women"),
    ("goose", "geese"), ("knife", "knives"), ("leaf", "leaves"), ("wolf", "wolves"), ("baby", "babies"),
    ("city", "cities"), ("box", "boxes"), ("bus", "buses"), ("potato", "potatoes"), ("sheep", "sheep"),
    ("fish", "fish"), ("person", "people"), ("ox", "oxen"), ("cactus", "cacti"), ("church", "churches"),
]
SEQUENCES = {
    "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "months": ["January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December"],
    "numbers": ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve"],
    "ordinals": ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"],
}


def items(rng: random.Random) -> list[dict]:
    out: list[dict] = []

    def add(kind: str, prompt: str, answer: str) -> None:
        out.append({"id": f"{kind}-{sum(1 for x in out if x['kind'] == kind) + 1:02d}", "kind": kind,
                    "prompt": prompt, "answer": answer})

    for i in range(30):
        a, b = rng.randint(10, 99), rng.randint(2, 9) if i % 2 else rng.randint(10, 99)
        add("add", f"12 + 7 = 19\n30 + 45 = 75\n8 + 26 = 34\n{a} + {b} =", str(a + b))
    for _ in range(15):
        a, b = rng.randint(10, 40), rng.randint(2, 9)
        add("sub", f"15 - 3 = 12\n40 - 8 = 32\n27 - 5 = 22\n{a} - {b} =", str(a - b))
    for _ in range(15):
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        add("mul", f"3 x 4 = 12\n7 x 2 = 14\n5 x 6 = 30\n{a} x {b} =", str(a * b))
    shots = "The capital of Cuba is Havana.\nThe capital of Kenya is Nairobi.\n"
    for country, city in CAPITALS:
        if country not in ("Cuba", "Kenya"):
            add("capital", f"{shots}The capital of {country} is", city)
    for word, opposite in ANTONYMS:
        if word not in ("hot", "big"):
            add("antonym", f"hot -> cold\nbig -> small\n{word} ->", opposite)
    for word, plural in PLURALS:
        add("plural", f"cat -> cats\nchild -> children\n{word} ->", plural)
    for name, seq in SEQUENCES.items():
        for i in range(3, len(seq), 2):
            add("sequence", ", ".join(seq[i - 3:i]) + ",", seq[i])
    return out


def main() -> None:
    here = Path(__file__).resolve().parent
    rows = items(random.Random(20261204))
    with open(here / "tasks.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} items to {here / 'tasks.jsonl'}")


if __name__ == "__main__":
    main()
