"""Packaging for luigi: a drop-in, faster and sturdier Luigi workflow runner."""

from setuptools import find_packages, setup

setup(
    name="luigi",
    version="3.8.0.dev0",
    description="Workflow runner compatible with Luigi: tasks, a central scheduler and a visualiser.",
    python_requires=">=3.10",
    packages=find_packages(include=["luigi", "luigi.*"]),
    include_package_data=True,
    package_data={"luigi": ["static/**/*", "templates/*.html", "py.typed"]},
    install_requires=[
        "tornado>=6.3,<7",
        "SQLAlchemy>=2.0,<3",
        "psutil>=5.9",
        "python-daemon>=3.0",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-xdist>=3.5",
            "pytest-timeout>=2.3",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.10",
            "aiosmtpd>=1.4",
            "jsonschema>=4",
            "playwright>=1.40",
            "psycopg[binary]>=3.1",
        ],
        "postgres": ["psycopg[binary]>=3.1"],
    },
    entry_points={
        "console_scripts": [
            "luigi = luigi.cmdline:luigi_run",
            "luigid = luigi.cmdline:luigid",
        ],
    },
)
