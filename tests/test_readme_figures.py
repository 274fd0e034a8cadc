"""The README's headline table must be what `python -m course_utils.figures` makes of results/."""

from course_utils.figures import main


def test_readme_figures_table_is_up_to_date():
    assert main(["--check"]) == 0, "run: python -m course_utils.figures"
