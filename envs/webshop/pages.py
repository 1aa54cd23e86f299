"""The shop's pages and how clicks move between them: the original text environment's page machine.

Pages: **search** (the instruction and a search bar), **results** (10 of the top 50 per page, with
``Back to Search``, ``< Prev``, ``Next >``), **item** (option groups, title, price, rating, the
``Description`` / ``Features`` / ``Reviews`` buttons, ``Buy Now``), the three **sub-pages** (and
``Attributes`` with ``show_attrs``), and **done** after ``Buy Now``.

Rules, as the original's: ``search[...]`` works where there is a search bar; ``click[...]`` takes a button,
a product ASIN or an option value shown on the page, compared lower-cased (here also stripped of outer
spaces); anything else changes nothing (:attr:`Outcome.valid` is False and the page stays). Clicking an
option value selects it in its group (the last group wins if two groups share a value). ``< Prev`` goes
from a sub-page to its item, from an item to its results page, and from a results page to the page before;
``Back to Search`` forgets the query, the selected options and the visited products.

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
    >>> session.click("buy now").valid, session.click("back to search").valid, session.page
    (False, True, 'search')
"""

from __future__ import annotations

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
    """

    catalog: Catalog
    index: SearchIndex
    instruction: str
    show_attrs: bool = False
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
        start = (self.page_number - 1) * PRODUCT_WINDOW
        shown = self.results[start : start + PRODUCT_WINDOW]
        return {self.catalog.listing(ordinal)[0].lower(): ordinal for ordinal in shown}

    def _option_groups(self) -> dict[str, str]:
        """Option value to its group, for the current product (a later group wins a shared value)."""
        assert self.product is not None
        return {value: name for name, values in self.catalog.product(self.product).options.items() for value in values}

    def _buttons(self) -> list[str]:
        if self.page == "results":
            buttons = [BACK_TO_SEARCH]
            if self.page_number > 1:
                buttons.append(PREV_PAGE)
            if self.page_number * PRODUCT_WINDOW < len(self.results):
                buttons.append(NEXT_PAGE)
            return buttons
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
        """``search[keywords]``: the top 50 products, first page."""
        if self.page != "search":
            return Outcome(False, "search is only available on the search page; click[back to search] first.")
        keywords = keywords.lower().strip()
        if not keywords:
            return Outcome(False, "search needs keywords, e.g. search[red running shoes].")
        self.keywords = keywords
        self.results = self.index.search(keywords, SEARCH_RETURN_N)
        self.page, self.page_number, self.product, self.options = "results", 1, None, {}
        return Outcome(True)

    def click(self, value: str) -> Outcome:
        """``click[value]``: a button, product or option of this page, compared lower-cased."""
        value = value.lower().strip()
        buttons = {button.lower(): button for button in self._buttons()}
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
            return [_Segment("WebShop"), *header, _Segment("Search", "button")]
        if self.page == "done":
            score = "" if self.score is None else f"{self.score:g}"
            return [
                _Segment("Thank you for shopping with us!"),
                _Segment("Your score (min 0.0, max 1.0)"),
                _Segment(score),
            ]
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
            for name, values in product.options.items():
                segments.append(_Segment(name))
                segments += [_Segment(value, "option", self.options.get(name) == value) for value in values]
            segments += [
                _Segment(product.title),
                _Segment(f"Price: {product.price_tag}"),
                _Segment(f"Rating: {product.rating}"),
            ]
            return segments + buttons[2:]
        if self.page == "description":
            return segments + [_Segment(product.description or "No Description")]
        if self.page == "features":
            bullets = [_Segment(bullet) for bullet in product.bullet_points if bullet]
            return segments + (bullets or [_Segment("No Features")])
        if self.page == "reviews":
            if not product.reviews:
                return segments + [_Segment("No reviews found")]
            for review in product.reviews:
                segments += [_Segment(f'"{review.title}"'), _Segment(str(review.score)), _Segment(review.body)]
            return segments
        return segments + [_Segment(attribute) for attribute in product.attributes]

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
                if segment.selected:
                    clicked.append(f"You have clicked {segment.text}.")
            elif segment.kind == "product":
                lines.append(f"\n[{tag}] {segment.text} [{tag}_]")
            else:
                lines.append(segment.text)
        return "\n".join([*clicked, *lines]) + "\n"
