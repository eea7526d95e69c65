"""Build assets/packs/cultivate.json from the CULTIVate / AHEaD public data.

Source: GitHub sinamalakouti/AHEaD (data commit 38b80ef): the activity catalog
(culturebench_prompts.json), refined reference descriptors for six countries, and the
country- and subactivity-level stereotype candidates. Usage:

    python tools/build_cultivate_pack.py ../shared/anchors/ahead assets/packs/cultivate.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DIMENSIONS = ("setting", "objects", "attire", "interaction", "spatial")


def country_name(key: str) -> str:
    return {"USA": "USA", "SOUTH_AFRICA": "South Africa"}.get(key, key.title())


def main(src: Path, out: Path) -> None:
    catalog = json.loads((src / "culturebench_prompts.json").read_text())
    country_stereo = json.loads((src / "country_stereotype_candidates.json").read_text())
    sub_stereo = json.loads((src / "subactivity_stereotype_candidates.json").read_text())
    countries = {}
    for key, activities in catalog.items():
        ref_file = src / "reference_descriptors" / f"{key.lower()}.json"
        refs = json.loads(ref_file.read_text()) if ref_file.exists() else {}
        entries = {}
        for category, subs in activities.items():
            for sub, phrase in subs.items():
                raw = refs.get(category, {}).get(sub)
                descriptors = None
                if raw:
                    descriptors = {
                        d: [t["token"].strip() for t in raw.get(d, []) if t.get("token")]
                        for d in DIMENSIONS
                    }
                entries[phrase] = {
                    "category": category,
                    "subactivity": sub,
                    "descriptors": descriptors,
                    "stereotypes": sub_stereo.get(key, {}).get(category, {}).get(sub, []),
                }
        countries[country_name(key)] = {
            "stereotypes": country_stereo.get(key, []),
            "activities": entries,
        }
    pack = {
        "name": "cultivate",
        "source": (
            "CULTIVate / AHEaD public data, GitHub sinamalakouti/AHEaD (data commit 38b80ef): "
            "activity catalog, refined reference descriptors (proposers gemini-2.5-flash and "
            "gpt-4o, refiner gpt-4o; tokens only), stereotype candidates per country and "
            "per subactivity"
        ),
        "dimensions": list(DIMENSIONS),
        "countries": countries,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(pack, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
