"""Build the API reference of pith-merge (docs/api.md): HTML from the docstrings, with pdoc.

``python docs/build_api.py [OUT_DIR]`` writes it into ``OUT_DIR`` (default ``out/api/``; open
``index.html``). Strict: any warning fails the build (exit 1, every warning listed), as pytest's
do, and the build warns where pdoc alone stays silent:

- a name of a documented module's ``__all__`` that pdoc cannot find, or that has no docstring;
- a cross-reference in a docstring (``:class:`Reason```, ``:func:`merge.fold```) that links to
  nothing in the reference (the template docs/api_templates/module.html.jinja2).

What it covers: :mod:`merge` (every name of ``merge.__all__``) and each public module under it
(no part of its name starts with ``_``), but for those of :data:`EXCLUDED`. The optional extras
must be installed (``pip install -e '.[dev,dask,postgres,testing,monitor]'``): their modules are
documented too.

Docstrings are reStructuredText. Two things pdoc does not do, done here (:func:`pdoc_reading`):
a variable's docstring may be the Sphinx comment ``#:`` above its assignment, the form this code
base writes; and a constant re-exported by ``from .module import NAME`` keeps the docstring it has
where it is defined (pdoc reads a variable's docstring only in the module that lists it).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import pdoc.doc
import pdoc.doc_ast
import pdoc.render
import pdoc.render_helpers

from merge._compat import OldMethodName

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "out" / "api"

#: The package the reference is of.
PACKAGE = "merge"
#: Public modules left out, with every module under them: the command line (its reference is
#: docs/cli.md), the demo (``make demo``), and the old name of :mod:`merge.testing`, whose every
#: name warns.
EXCLUDED = ("merge.cli", "merge.demo", "merge.strategies")

#: A reST cross-reference, as pdoc reads them: the target is the group, after Sphinx's ``~``
#: (its short form, shown as the last part). pdoc would show the ``~``: it is dropped, the whole
#: target shown.
ROLE = re.compile(r"((?::py)?:(?:mod|func|data|const|class|meth|attr|exc|obj):`)~?([^`]+)`")
#: pdoc's warning when it cannot evaluate an annotation: the group is the annotated object.
ANNOTATION_WARNING = re.compile(r"Error parsing type annotation .* for ([\w.]+?)(?:\. Import of |: )")


#: Warnings still expected, each a problem for its module's owner to fix: docstrings of
#: merge.monitor, merge.native and merge.replay, and ``JsonScan`` (the result of the exported
#: ``scan_json``), which ``merge.canonical.__all__`` does not list. A known problem that no longer
#: warns fails the build too ("remove it"), so the list only shrinks.
KNOWN_PROBLEMS = frozenset(
    {
        "merge.canonical.scan_json: the cross-reference JsonScan links to nothing in the reference",
        "merge.native.fold.fold_native: the cross-reference admit_batch links to nothing in the reference",
        "merge.native.fold.fold_native: the cross-reference judge_events links to nothing in the reference",
    }
)


class ApiDocsError(Exception):
    """The build warned: the reference is not clean (``problems`` lists each warning, as text)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{len(problems)} problems:\n" + "\n".join(problems))


def documented_modules() -> list[str]:
    """The modules of the reference, by name: :data:`PACKAGE` and its public modules, not :data:`EXCLUDED`."""
    package = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}."):
        private = any(part.startswith("_") for part in info.name.split("."))
        excluded = any(info.name == name or info.name.startswith(f"{name}.") for name in EXCLUDED)
        if not private and not excluded:
            names.append(info.name)
    return names


def load_module(name: str) -> Any:
    """Import a module as the reference shows it: a name of its ``__all__`` that its ``__getattr__``
    imports on first use (PEP 562, as :mod:`merge.monitor` does) is set, since pdoc reads only
    ``__dict__``."""
    module = importlib.import_module(name)
    for export in getattr(module, "__all__", ()):
        # A name that is not there at all is left to pdoc, which warns.
        if export not in vars(module) and hasattr(module, export):
            setattr(module, export, getattr(module, export))
    return module


def assigned_name(statement: ast.stmt) -> str | None:
    """The one plain name an assignment statement binds (``X = ...``, ``X: T = ...``), else ``None``."""
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    return None


def doc_comments(source: str, body: list[ast.stmt]) -> dict[str, str]:
    """The Sphinx doc comments (``#:`` lines right above an assignment) of the statements of a module
    or class ``body``, parsed from ``source``: assigned name → the comment's text."""
    lines = source.splitlines()
    found: dict[str, str] = {}
    for statement in body:
        name = assigned_name(statement)
        comment: list[str] = []
        above = statement.lineno - 2
        while name and above >= 0 and lines[above].lstrip().startswith("#:"):
            comment.insert(0, lines[above].lstrip()[2:].strip())
            above -= 1
        if name and comment:
            found[name] = "\n".join(comment)
    return found


def reexported_docstrings(module: Any, body: list[ast.stmt]) -> dict[str, str]:
    """The docstrings of the variables of a module's ``__all__`` that it imports from another module
    of :data:`PACKAGE` (``from .canonical import MAX_DEPTH``), as they are where they are defined."""
    exported = set(getattr(module, "__all__", ()))
    found: dict[str, str] = {}
    for statement in body:
        # ``from . import signatures`` imports modules, never a variable: not followed (a cycle).
        if not isinstance(statement, ast.ImportFrom) or statement.module is None:
            continue
        source = importlib.util.resolve_name("." * statement.level + statement.module, module.__package__)
        if source.partition(".")[0] != PACKAGE or source not in sys.modules:
            continue
        docstrings = pdoc.doc_ast.walk_tree(sys.modules[source]).var_docstrings
        for alias in statement.names:
            name = alias.asname or alias.name
            if name in exported and alias.name in docstrings:
                found[name] = docstrings[alias.name]
    return found


@contextlib.contextmanager
def pdoc_reading() -> Iterator[None]:
    """Within: pdoc reads a variable's docstring in its ``#:`` comment and, for a re-exported one,
    where it is defined, when it has none of pdoc's own (a string after the assignment)."""
    walk_tree = pdoc.doc_ast.walk_tree

    @functools.cache
    def walk_tree_and_comments(obj: Any) -> pdoc.doc_ast.AstInfo:
        info = walk_tree(obj)
        body = pdoc.doc_ast.parse(obj).body
        found = doc_comments(pdoc.doc_ast.get_source(obj), body)
        if inspect.ismodule(obj):
            found = {**reexported_docstrings(obj, body), **found}
        return pdoc.doc_ast.AstInfo({**found, **info.var_docstrings}, info.func_docstrings, info.annotations)

    pdoc.doc_ast.walk_tree = walk_tree_and_comments
    try:
        yield
    finally:
        pdoc.doc_ast.walk_tree = walk_tree


def outside_reference(target: str, doc: pdoc.doc.Doc[Any]) -> bool:
    """Whether a cross-reference names what the reference has no page for, and is not checked: a
    builtin, the standard library, a dependency, :mod:`pith_merge`, or a module of :data:`EXCLUDED`.
    (A private name of :data:`PACKAGE`, or one that names nothing, is not.)"""
    if any(target == name or target.startswith(f"{name}.") for name in EXCLUDED):
        return True
    head = target.partition(".")[0]
    namespace = vars(sys.modules[doc.modulename])
    if head in namespace:
        obj = namespace[head]
    elif hasattr(builtins, head):
        return True
    else:
        try:
            obj = importlib.import_module(head)
        except ImportError:
            return False
    module = obj if inspect.ismodule(obj) else inspect.getmodule(obj)
    return module is not None and module.__name__.partition(".")[0] != PACKAGE


@jinja2.pass_context
def check_references(context: jinja2.runtime.Context, doc: pdoc.doc.Doc[Any]) -> str:
    """Warn for each cross-reference (``:class:`X```, ...) of a docstring that pdoc does not link
    (it leaves them as plain code, silently), but for those :func:`outside_reference`. A filter of
    the template docs/api_templates/module.html.jinja2, run on each docstring shown; it adds nothing."""
    for _, target in ROLE.findall(doc.docstring):
        linked = pdoc.render_helpers.linkify(context, f"<code>{target}</code>", namespace=doc.qualname)
        if "<a " not in linked and not outside_reference(target, doc):
            warnings.warn(
                f"{doc.fullname}: the cross-reference {target} links to nothing in the reference",
                stacklevel=1,
            )
    return ""


@jinja2.pass_context
def to_markdown(context: jinja2.runtime.Context, docstring: str) -> str:
    """pdoc's filter ``to_markdown``, but for Sphinx's short form ``~a.b`` of a cross-reference,
    shown ``a.b`` (pdoc would show the ``~``)."""
    return str(pdoc.render_helpers.to_markdown_with_context(context, ROLE.sub(r"\1\2`", docstring)))


def old_name(doc: pdoc.doc.Doc[Any]) -> bool:
    """Whether a member is an old name that only warns (a method's, :mod:`merge._compat`): the
    reference shows the names to use (the template's ``is_public`` leaves old names out)."""
    return isinstance(doc.obj, OldMethodName)


def check_exports(module: pdoc.doc.Module) -> None:
    """Warn for each name of the module's ``__all__`` that pdoc cannot find, or finds undocumented."""
    for name in getattr(module.obj, "__all__", ()):
        member = module.get(name)
        if member is None:
            warnings.warn(
                f"{module.fullname}.{name}: in __all__, but pdoc finds no such member", stacklevel=1
            )
        elif not member.docstring.strip():
            warnings.warn(f"{module.fullname}.{name}: in __all__, but has no docstring", stacklevel=1)


def generated_code(message: str, modules: Mapping[str, pdoc.doc.Module]) -> bool:
    """Whether a warning is pdoc failing to evaluate an annotation of code that no module holds: a
    ``NamedTuple``'s ``__new__`` (pdoc's issue 765), a Hypothesis ``@composite`` strategy's
    signature. pdoc shows such an annotation as written, which is all it can do."""
    match = ANNOTATION_WARNING.match(message)
    if match is None:
        return False
    fullname = match.group(1)
    for module_name, module in modules.items():
        if fullname.startswith(f"{module_name}."):
            member = module.get(fullname.removeprefix(f"{module_name}."))
            if member is not None and inspect.getmodule(member.obj) is None:
                return True
    return False


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def build(out: Path = DEFAULT_OUT) -> list[str]:
    """Write the reference into ``out``; return the names of the modules documented.

    Raises :class:`ApiDocsError` if anything warned (the pages are written all the same).
    """
    with warnings.catch_warnings(record=True) as caught, pdoc_reading():
        # Every warning is recorded, to report them all at once: under the "error" filter the first
        # would end the build, or vanish into one of pdoc's ``except`` clauses.
        warnings.simplefilter("always")
        pdoc.render.configure(
            docformat="restructuredtext",
            template_directory=HERE / "api_templates",
            # The source is in the package; highlighting it would take half of the build's time.
            show_source=False,
            footer_text=f"pith-merge {importlib.import_module(PACKAGE).__version__}",
        )
        pdoc.render.env.filters.update(
            check_references=check_references, to_markdown=to_markdown, old_name=old_name
        )
        modules = {name: pdoc.doc.Module(load_module(name)) for name in documented_modules()}
        for name, module in modules.items():
            # A page's list of submodules: the documented modules right under it. (pdoc takes a
            # package's submodules from its __all__, which here lists names, not modules.)
            module.submodules = [
                sub for sub_name, sub in modules.items() if sub_name.rpartition(".")[0] == name
            ]
        for name, module in modules.items():
            write(out / f"{name.replace('.', '/')}.html", pdoc.render.html_module(module, modules))
            check_exports(module)
        write(out / "index.html", pdoc.render.html_index(modules))
        write(out / "search.js", pdoc.render.search_index(modules))
    warned = {str(w.message) for w in caught if not generated_code(str(w.message), modules)}
    problems = sorted(warned - KNOWN_PROBLEMS)
    problems += [
        f"{known} (known, but no longer warned: remove it from KNOWN_PROBLEMS)"
        for known in sorted(KNOWN_PROBLEMS - warned)
    ]
    if problems:
        raise ApiDocsError(problems)
    return list(modules)


def main(argv: list[str]) -> int:
    """The command: ``python docs/build_api.py [OUT_DIR]``."""
    if len(argv) > 1:
        print("usage: python docs/build_api.py [OUT_DIR]", file=sys.stderr)
        return 2
    out = Path(argv[0]) if argv else DEFAULT_OUT
    try:
        modules = build(out)
    except ApiDocsError as error:
        print(f"the API reference is not clean: {error}", file=sys.stderr)
        return 1
    print(f"the API reference of {len(modules)} modules: {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
