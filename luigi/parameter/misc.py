"""Parameters whose values are not plain data: filesystem paths and task classes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from luigi.parameter.base import Parameter

if TYPE_CHECKING:
    from luigi.task import Task


class PathParameter(Parameter[Path]):
    """A ``pathlib.Path``, optionally made absolute and/or required to exist when normalised."""

    def __init__(self, *args: Any, absolute: bool = False, exists: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.absolute = absolute
        self.exists = exists

    def parse(self, x: str) -> Path:
        return self.normalize(x)

    def normalize(self, x: Any) -> Path:
        try:
            path = Path(x)
        except TypeError:
            raise ValueError(f"{x!r} is not a valid path (expected a string or a path)") from None
        if self.absolute:
            path = path.absolute()
        if self.exists and not path.exists():
            raise ValueError(f"The path {str(path)!r} does not exist")
        return path

    def serialize(self, x: Any) -> str:
        return str(x)


class TaskParameter(Parameter[type["Task"]]):
    """A task class, written as its family name (``ns.ClassName``) and looked up in the task registry."""

    def parse(self, input: str) -> Any:
        from luigi import task_register  # imported late: the registry imports parameters

        try:
            return task_register.Register.get_task_cls(input)
        except task_register.TaskClassException as exc:
            raise ValueError(f"{input!r} is not a usable task family: {exc}") from exc

    def serialize(self, cls: Any) -> str:
        return cls.get_task_family()
