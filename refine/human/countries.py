"""Country names as raters write them: one table of the countries the bundled packs,
recipes and papers name, each with its other names (short and official, ISO codes), native
spellings and demonyms, so that a rater who wrote "United States", "American", "Brasil" or
"Russian Federation" is placed in the country a table or a protocol names "USA", "Brazil"
or "Russia".

Used where a rater's free-text country meets a country name: a protocol's qualification
(:func:`refine.human.protocols.qualifies`: the rater is from the image's country) and CAIRE
C.9's join of raters to label countries (:mod:`refine.harness.tasks.caire.table`). A name
the table does not hold is compared as written (case, accents, "the" and punctuation
aside); a caller that must place every rater counts and names those it could not.

The names: the English short and official names (ISO 3166-1, as ``pycountry`` gives them),
the alpha-2 and alpha-3 codes, the name in the country's own languages, and the demonyms
(adjective and people). ``pycountry`` would give the first two only; the table is small and
kept by hand for that reason.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

# canonical name (as the packs and recipes write it) -> the other names raters use
COUNTRIES: dict[str, tuple[str, ...]] = {
    "Brazil": ("BR", "BRA", "Federative Republic of Brazil", "Brasil", "Brazilian",
               "Brazilians", "Brasileiro", "Brasileira"),
    "Canada": ("CA", "CAN", "Canadian", "Canadians"),
    "Chile": ("CL", "CHL", "Republic of Chile", "Chilean", "Chileans", "Chileno", "Chilena"),
    "China": ("CN", "CHN", "People's Republic of China", "PRC", "Zhongguo", "中国", "中國",
              "Chinese"),
    "Egypt": ("EG", "EGY", "Arab Republic of Egypt", "Misr", "مصر", "Egyptian", "Egyptians"),
    "France": ("FR", "FRA", "French Republic", "French", "Français", "Française",
               "Frenchman", "Frenchwoman"),
    "Germany": ("DE", "DEU", "Federal Republic of Germany", "Deutschland", "German",
                "Germans", "Deutsch", "Deutsche", "Deutscher"),
    "India": ("IN", "IND", "Republic of India", "Bharat", "भारत", "Indian", "Indians"),
    "Indonesia": ("ID", "IDN", "Republic of Indonesia", "Indonesian", "Indonesians"),
    "Iran": ("IR", "IRN", "Islamic Republic of Iran", "Iran, Islamic Republic of", "Persia",
             "ایران", "Iranian", "Iranians", "Persian"),
    "Italy": ("IT", "ITA", "Italian Republic", "Italia", "Italian", "Italians", "Italiano",
              "Italiana"),
    "Japan": ("JP", "JPN", "Nippon", "Nihon", "日本", "Japanese"),
    "Mexico": ("MX", "MEX", "United Mexican States", "México", "Mexican", "Mexicans",
               "Mexicano", "Mexicana"),
    "Nepal": ("NP", "NPL", "Federal Democratic Republic of Nepal", "नेपाल", "Nepali",
              "Nepalese"),
    "Nigeria": ("NG", "NGA", "Federal Republic of Nigeria", "Nigerian", "Nigerians"),
    "Philippines": ("PH", "PHL", "Republic of the Philippines", "Pilipinas", "Filipino",
                    "Filipina", "Filipinos", "Philippine"),
    "Poland": ("PL", "POL", "Republic of Poland", "Polska", "Polish", "Pole", "Poles"),
    "Russia": ("RU", "RUS", "Russian Federation", "Rossiya", "Россия", "Russian", "Russians"),
    "South Africa": ("ZA", "ZAF", "Republic of South Africa", "RSA", "Suid-Afrika",
                     "South African", "South Africans"),
    "Spain": ("ES", "ESP", "Kingdom of Spain", "España", "Espana", "Spanish", "Spaniard",
              "Spaniards", "Español", "Española"),
    "Turkey": ("TR", "TUR", "Türkiye", "Turkiye", "Republic of Türkiye", "Turkish", "Turk",
               "Turks"),
    "UK": ("GB", "GBR", "United Kingdom", "United Kingdom of Great Britain and Northern "
           "Ireland", "Great Britain", "Britain", "England", "Scotland", "Wales",
           "Northern Ireland", "British", "Briton", "Britons", "English", "Scottish",
           "Welsh"),
    "USA": ("US", "United States", "United States of America", "America", "U.S.",
            "U.S.A.", "American", "Americans", "Estados Unidos"),
}  # fmt: skip


def folded(name: str) -> str:
    """A name as compared: case and accents folded, "the" and punctuation left out."""
    text = unicodedata.normalize("NFKD", name.casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"[.'’]", "", text)
    words = re.sub(r"[^\w]+", " ", text).split()
    return " ".join(w for w in words if w != "the")


@cache
def _index() -> dict[str, str]:
    out: dict[str, str] = {}
    for country, names in COUNTRIES.items():
        for name in (country, *names):
            key = folded(name)
            if out.setdefault(key, country) != country:  # one name, one country
                raise ValueError(f"{name!r} names both {out[key]} and {country}")
    return out


def country_of(name: str | None) -> str | None:
    """The table's country a rater's ``name`` names ("American" -> "USA"), or None where
    the table holds no such name."""
    if not name or not name.strip():
        return None
    return _index().get(folded(name))


def same_country(a: str | None, b: str | None) -> bool:
    """Whether two names name one country (by the table; as written where it holds
    neither)."""
    if not a or not b:
        return False
    ca, cb = country_of(a), country_of(b)
    if ca is not None or cb is not None:
        return ca == cb
    return folded(a) == folded(b)


def place(name: str | None, among: list[str]) -> str | None:
    """The one of ``among`` (a table's countries, as it writes them) that ``name`` names,
    or None."""
    return next((c for c in among if same_country(name, c)), None)
