"""A real Beam pipeline for the beam_dataflow tests: sum ``name,count`` CSV lines per name.

Run as a program, as a `BeamDataflowJobTask` runs it: ``--input`` (comma-separated file patterns) and
``--output`` (one file) are its own flags; every other flag goes to Beam's ``PipelineOptions`` (the runner
and the Dataflow service options). A line whose count is not a number fails the pipeline.
"""

from __future__ import annotations

import argparse

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions


def _parse(line: str) -> tuple[str, int]:
    name, count = line.split(",")
    return name, int(count)  # ValueError on a malformed count: the pipeline fails


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    known, beam_args = parser.parse_known_args(argv)
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        lines = [
            pipeline | f"read {i}" >> beam.io.ReadFromText(p) for i, p in enumerate(known.input.split(","))
        ]
        (
            lines
            | beam.Flatten()
            | beam.Map(_parse)
            | beam.CombinePerKey(sum)
            | beam.MapTuple(lambda name, total: f"{name},{total}")
            | beam.io.WriteToText(known.output, shard_name_template="")
        )


if __name__ == "__main__":
    main()
