"""The shop's pages and how clicks move between them: the original text environment's page machine.

Pages: **search** (the instruction and a search bar), **results** (10 of the top 50 per page, with
``Back to Search``, ``< Prev``, ``Next >``), **item** (option groups, title, price, rating, the
``Description`` / ``Features`` / ``Reviews`` buttons, ``Buy Now``), the three **sub-pages** (and
``Attributes`` with ``show_attrs``), and **done** after ``Buy Now``.

Rules, as the released text env's (``web_agent_text_env.py``), quirks included:

* ``search[...]`` works on every page, not only where the search bar is (the env never checks); its
  keywords are lower-cased. Keywords that are only spaces change nothing here (the original would send
  them to its search engine).
* ``click[...]`` takes a button, a product ASIN or an option value shown on the page, compared
  lower-cased and *not* stripped (``click[ buy now ]`` is not ``Buy Now``). The search page's ``Search``
  button is listed among its clickables but clicking it does nothing.
* ``Next >`` shows on every results page, the last included; past it come empty pages. ``< Prev`` shows
  from page 2.
* Anything else changes nothing (:attr:`Outcome.valid` is False and the page stays). Clicking an option
  value selects it in its group (the last group wins if two groups share a value). ``< Prev`` goes from a
  sub-page to its item, from an item to its results page, and from a results page to the page before;
  ``Back to Search`` forgets the query, the selected options and the visited products.
* The item page shows ``Rating: N.A.`` and the Reviews page shows no review: the released loader never
  reads the reviews file (those lines are commented out). ``show_reviews=True`` shows the data's rating and
  reviews instead (an addition, never the default). An empty description or feature list shows nothing.

Pages render as the original's two text modes: ``text`` joins the visible strings with ``" [SEP] "``;
``text_rich`` writes one per line, buttons as ``[button] x [button_]``, selected options and visited
products as ``[clicked button] x [clicked button_]``.

Example:
    >>> import tempfile
    >>> from agentfly_envs.webshop.generator import GeneratedCatalog
    >>> from agentfly_envs.webshop.index import open_index
    >>> catalog = GeneratedCatalog(100, seed=2)
    >>> session = Session(catalog, open_index(catalog, tempfile.mkdtemp()), "i need a lamp")
    >>> session.render("text")
    'WebShop [SEP] Instruction: [SEP] i need a lamp [SEP] Search'
    >>> session.search("desk lamp").valid, session.page, session.available()["clickables"][0]
    (True, 'results', 'back to search')
    >>> session.click("buy now").valid, session.click(" back to search").valid, session.click("back to search").valid
    (False, False, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfly_envs.webshop.catalog import Catalog
from agentfly_envs.webshop.index import SEARCH_RETURN_N, SearchIndex

__all__ = ["PRODUCT_WINDOW", "Mode", "Outcome", "Session"]

Mode = Literal["text", "text_rich"]
Kind = Literal["text", "button", "option", "product"]

#: Products per results page (the original's ``PRODUCT_WINDOW``).
PRODUCT_WINDOW = 10
BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SEARCH = "Search"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
SUB_PAGE_NAMES = tuple(button.lower() for button in SUB_PAGES)


@dataclass
class Outcome:
    """What an action did.

    Attributes:
        valid: False when the action was not available here and changed nothing.
        message: Why an invalid action did nothing (for the model).
        bought: The action was ``Buy Now``; the episode ends.
    """

    valid: bool
    message: str = ""
    bought: bool = False


@dataclass
class _Segment:
    text: str
    kind: Kind = "text"
    selected: bool = False


@dataclass
class Session:
    """One shopper's walk through the shop.

    Args:
        catalog: The products.
        index: The catalog's search index.
        instruction: The goal's instruction text, shown on every page.
        show_attrs: Offer the ``Attributes`` sub-page on item pages (the original's ``show_attrs``).
        show_reviews: Show the data's rating and reviews (the original shows ``N.A.`` and none).
        results_per_page: Products on a results page (the original shows :data:`PRODUCT_WINDOW`).
    """

    catalog: Catalog
    index: SearchIndex
    instruction: str
    show_attrs: bool = False
    show_reviews: bool = False
    results_per_page: int = PRODUCT_WINDOW
    page: str = "search"
    keywords: str = ""
    results: list[int] = field(default_factory=list)
    page_number: int = 1
    product: int | None = None
    options: dict[str, str] = field(default_factory=dict)
    visited: set[int] = field(default_factory=set)
    score: float | None = None

    # ----------------------------------------------------------------- what can be done here

    def product_links(self) -> dict[str, int]:
        """The products on this results page: lower-cased ASIN to ordinal."""
        start = (self.page_number - 1) * self.results_per_page
        shown = self.results[start : start + self.results_per_page]
        return {self.catalog.listing(ordinal)[0].lower(): ordinal for ordinal in shown}

    def _option_groups(self) -> dict[str, str]:
        """Option value to its group, for the current product (a later group wins a shared value)."""
        assert self.product is not None
        return {value: name for name, values in self.catalog.product(self.product).options.items() for value in values}

    def _buttons(self) -> list[str]:
        if self.page == "search":
            return [SEARCH]
        if self.page == "results":
            return [BACK_TO_SEARCH, PREV_PAGE, NEXT_PAGE] if self.page_number > 1 else [BACK_TO_SEARCH, NEXT_PAGE]
        if self.page == "item":
            return [BACK_TO_SEARCH, PREV_PAGE, *SUB_PAGES[: 4 if self.show_attrs else 3], BUY_NOW]
        if self.page in SUB_PAGE_NAMES:
            return [BACK_TO_SEARCH, PREV_PAGE]
        return []

    def available(self) -> dict[str, Any]:
        """The original's ``get_available_actions``: whether ``search`` works, and what can be clicked."""
        clickables = [button.lower() for button in self._buttons()]
        if self.page == "results":
            clickables += list(self.product_links())
        elif self.page == "item":
            clickables += list(dict.fromkeys(self._option_groups()))
        return {"has_search_bar": self.page == "search", "clickables": clickables}

    # ----------------------------------------------------------------- actions

    def search(self, keywords: str) -> Outcome:
        """``search[keywords]`` (on any page, as the original): the top 50 products, first page."""
        keywords = keywords.lower()
        if not keywords.strip():
            return Outcome(False, "search needs keywords, e.g. search[red running shoes].")
        self.keywords = keywords
        self.results = self.index.search(keywords.strip(), SEARCH_RETURN_N)
        self.page, self.page_number, self.product, self.options = "results", 1, None, {}
        return Outcome(True)

    def click(self, value: str) -> Outcome:
        """``click[value]``: a button, product or option of this page, compared lower-cased (not stripped)."""
        value = value.lower()
        buttons = {button.lower(): button for button in self._buttons() if button != SEARCH}
        if value in buttons:
            return self._press(buttons[value])
        if self.page == "results":
            links = self.product_links()
            if value in links:
                self.product = links[value]
                self.visited.add(self.product)
                self.page = "item"
                return Outcome(True)
        if self.page == "item":
            groups = self._option_groups()
            if value in groups:
                self.options[groups[value]] = value
                return Outcome(True)
        shown = value if len(value) <= 60 else value[:57] + "..."
        where = "search page (use search[...])" if self.page == "search" else f"{self.page} page"
        if value != value.strip():
            where += " (the value must be written without spaces around it)"
        return Outcome(False, f'"{shown}" is not something to click on the {where}.')

    def _press(self, button: str) -> Outcome:
        if button == BUY_NOW:
            self.page = "done"
            return Outcome(True, bought=True)
        if button == BACK_TO_SEARCH:
            self.page, self.keywords, self.results, self.product, self.options = "search", "", [], None, {}
            self.visited.clear()
        elif button == NEXT_PAGE:
            self.page_number += 1
        elif button == PREV_PAGE and self.page == "results":
            self.page_number -= 1
        elif button == PREV_PAGE and self.page == "item":
            self.page, self.product, self.options = "results", None, {}
        elif button == PREV_PAGE:  # from a sub-page back to its item
            self.page = "item"
        else:  # a sub-page
            self.page = button.lower()
        return Outcome(True)

    # ----------------------------------------------------------------- rendering

    def _segments(self) -> list[_Segment]:
        header = [_Segment("Instruction:"), _Segment(self.instruction)]
        buttons = [_Segment(button, "button") for button in self._buttons()]
        if self.page == "search":
            return [_Segment("WebShop"), _Segment("Instruction: "), header[1], *buttons]
        if self.page == "done":
            return self._done_segments()
        if self.page == "results":
            total = f"Page {self.page_number} (Total results: {len(self.results)})"
            segments = [*header, buttons[0], _Segment(total), *buttons[1:]]
            for ordinal in self.product_links().values():
                asin, title, price_tag = self.catalog.listing(ordinal)
                segments += [_Segment(asin, "product", ordinal in self.visited), _Segment(title), _Segment(price_tag)]
            return segments
        assert self.product is not None
        product = self.catalog.product(self.product)
        segments = [*header, *buttons[:2]]
        if self.page == "item":
            # Shown as clicked, as the original decides it: the value in quotes is in the JSON of the choices
            # (so a value chosen in one group shows clicked in every group, and one JSON escapes never does).
            chosen = json.dumps(self.options)
            for name, values in product.options.items():
                segments.append(_Segment(name))
                segments += [_Segment(value, "option", f'"{value}"' in chosen) for value in values]
            rating = product.rating if self.show_reviews else "N.A."
            segments += [
                _Segment(product.title),
                _Segment(f"Price: {product.price_tag}"),
                _Segment(f"Rating: {rating}"),
            ]
            return segments + buttons[2:]
        if self.page == "description":
            return segments + ([_Segment(product.description)] if product.description else [])
        if self.page == "features":
            return segments + [_Segment(f" {bullet}") for bullet in product.bullet_points]
        if self.page == "reviews":
            for review in product.reviews if self.show_reviews else ():
                segments += [_Segment(f'"{review.title}"'), _Segment(str(review.score)), _Segment(review.body)]
            return segments
        # The Attributes page (show_attrs) ends with the product's category, search query and category path.
        attributes = [_Segment(f" {attribute}") for attribute in product.attributes]
        return [*segments, *attributes, *map(_Segment, (product.category, product.query, product.product_category))]

    def _done_segments(self) -> list[_Segment]:
        """The original's done page as its text env reads it: the MTurk template, with what it is not given
        (the code, attributes, category, the goal, the reward's details) printed as ``None`` or nothing."""
        assert self.product is not None
        options = json.dumps(self.options, sort_keys=True)  # Flask 2.1's ``tojson``: sorted, ASCII, HTML-safe
        for character, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
            options = options.replace(character, escape)
        purchased = [self.catalog.listing(self.product)[0], "options", options]
        purchased += [line for label in ("attrs", "category", "query", "product category") for line in (label, "None")]
        target = ["asin", "options", "attrs", "price upper", "instuction text", "category", "product category", "query"]
        lines = ["Thank you for shopping with us!", "Your code: ", "None", " (Paste it in your MTurk interface.)"]
        lines += ["Purchased", "asin", *purchased, "Target", *target, "Goal ", "None", "Reward"]
        lines += ["Your score (min 0.0, max 1.0)", str(self.score), "Reward Details ", "None"]
        return [_Segment(line) for line in lines]

    def render(self, mode: Mode = "text") -> str:
        """The page as the model reads it."""
        segments = self._segments()
        if mode == "text":
            return " [SEP] ".join(segment.text.strip() for segment in segments)
        lines = []
        clicked = []
        for segment in segments:
            tag = "clicked button" if segment.selected else "button"
            if segment.kind == "button":
                lines.append(f"[button] {segment.text} [button_]")
            elif segment.kind == "option":
                lines.append(f"  [{tag}] {segment.text} [{tag}_]")
                if segment.selected:  # the original puts each one first: the last clicked line comes first
                    clicked.insert(0, f"You have clicked {segment.text}.")
            elif segment.kind == "product":
                lines.append(f"\n[{tag}] {segment.text} [{tag}_]")
            else:
                lines.append(segment.text)
        return "\n".join([*clicked, *lines]) + "\n"
