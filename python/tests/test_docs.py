"""The task API's docs show code that runs: docs/task-api.md shows
examples/cpp/task_api.cc and examples/python/task_api.py as they are (ctest
builds and runs both: example_cpp_task_api, example_python_task_api), and
README.md shows the issue's example, which test_scheduler.py runs verbatim,
and lines of the C++ example, in its order."""
import os
import re

from test_scheduler import ISSUE_EXAMPLE

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def blocks(text, lang):
    return re.findall(r"```" + lang + r"\n(.*?)```", text, re.S)


def test_the_guide_shows_the_examples_as_they_are():
    guide = read("docs/task-api.md")
    shown = re.findall(r"<!-- example: (\S+) -->\n```\w+\n(.*?)```", guide, re.S)
    assert sorted(path for path, _ in shown) == ["examples/cpp/task_api.cc", "examples/python/task_api.py"]
    for path, code in shown:
        assert code == read(path), f"docs/task-api.md shows an old {path}: copy the file into the guide"


def test_the_readme_shows_code_that_runs():
    readme = read("README.md")
    section = readme[readme.index("## Task API"):readme.index("## Layout")]
    assert [b.strip() for b in blocks(section, "python")] == [ISSUE_EXAMPLE.strip()]
    example = [line.strip() for line in read("examples/cpp/task_api.cc").splitlines()]
    (cpp,) = blocks(section, "cpp")
    lines = [line.strip() for line in cpp.strip().splitlines()]
    rest = iter(example)
    missing = [line for line in lines if line not in rest]  # in order: `in` consumes the iterator
    assert not missing, f"README.md's C++ lines {missing} are not examples/cpp/task_api.cc's, in its order"
