"""A mypy plugin that types the constructor of every ``Task`` from the parameters declared on it.

Enable it in the mypy configuration::

    [mypy]
    plugins = luigi.mypy

Then, for ``class Report(luigi.Task)`` declaring ``day = luigi.DateParameter()`` and
``copies = luigi.IntParameter(default=1)``, mypy checks ``Report(day=date(2024, 1, 1), copies=2)`` as a
call to ``__init__(self, day: date, copies: int = ...)``: a missing ``day``, a ``copies="2"`` or an unknown
keyword is reported. Parameters are inherited along the class hierarchy.

An argument's type is the annotation when there is one (``size: int = luigi.IntParameter()``: calling a
parameter class is typed ``Any``, so that assignment is accepted). Otherwise it comes from the parameter
class: ``Parameter`` -> ``str``, ``IntParameter`` -> ``int``, ``DateParameter`` -> ``date``, ...;
``Optional*`` adds ``| None``; classes whose values vary give ``Any``. A ``default`` (or
``BoolParameter``'s implicit ``False``) makes the argument optional; ``positional=False`` makes it
keyword-only. A class with its own ``__init__`` keeps it; a decorated class (``@requires``,
``@inherits``, which add parameters at run time) also accepts further arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mypy.nodes import (
    ARG_NAMED,
    ARG_NAMED_OPT,
    ARG_OPT,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    Argument,
    AssignmentStmt,
    CallExpr,
    Expression,
    NameExpr,
    RefExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import ClassDefContext, FunctionContext, Plugin, SemanticAnalyzerPluginInterface
from mypy.plugins.common import add_method_to_class, deserialize_and_fixup_type
from mypy.types import (
    AnyType,
    Instance,
    NoneType,
    PlaceholderType,
    Type,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

__all__ = ["TaskPlugin", "plugin"]

TASK_FULLNAME = "luigi.task.Task"
METADATA_KEY = "luigi"
OPTIONAL_MIXIN = "OptionalParameterMixin"

# The value type of each parameter class, by class name; a subclass takes the first match along its MRO.
VALUE_TYPES: dict[str, str] = {
    "Parameter": "builtins.str",
    "StrParameter": "builtins.str",
    "IntParameter": "builtins.int",
    "FloatParameter": "builtins.float",
    "BoolParameter": "builtins.bool",
    "DateParameter": "datetime.date",
    "MonthParameter": "datetime.date",
    "YearParameter": "datetime.date",
    "DateHourParameter": "datetime.datetime",
    "DateMinuteParameter": "datetime.datetime",
    "DateSecondParameter": "datetime.datetime",
    "TimeDeltaParameter": "datetime.timedelta",
    "DateIntervalParameter": "luigi.date_interval.DateInterval",
}
# Parameter classes whose values are too varied to name (lists, dicts, task classes, choices, ...).
ANY_VALUED = frozenset(
    {
        "ListParameter",
        "TupleParameter",
        "DictParameter",
        "TaskParameter",
        "ChoiceParameter",
        "ChoiceListParameter",
        "NumericalParameter",
        "PathParameter",
        "EnumListParameter",
    }
)
IMPLICIT_DEFAULT = frozenset({"BoolParameter"})


@dataclass(frozen=True)
class TaskParameterField:
    """One parameter of a task as the constructor sees it."""

    name: str
    type: Type
    has_default: bool
    positional: bool

    def serialize(self) -> dict[str, object]:
        return {
            "name": self.name,
            "type": self.type.serialize(),
            "has_default": self.has_default,
            "positional": self.positional,
        }

    @classmethod
    def deserialize(cls, data: dict[str, object], api: SemanticAnalyzerPluginInterface) -> TaskParameterField:
        raw_type = data["type"]
        assert isinstance(raw_type, (str, dict))
        return cls(
            name=str(data["name"]),
            type=deserialize_and_fixup_type(raw_type, api),
            has_default=bool(data["has_default"]),
            positional=bool(data["positional"]),
        )


class TaskPlugin(Plugin):
    """Adds a typed ``__init__`` to each subclass of ``luigi.task.Task``."""

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        symbol = self.lookup_fully_qualified(fullname)
        if symbol is not None and isinstance(symbol.node, TypeInfo) and _is_task(symbol.node):
            return _transform_task_class
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        """Calling a parameter class gives Any, so that ``size: int = luigi.IntParameter()`` is accepted."""
        symbol = self.lookup_fully_qualified(fullname)
        if symbol is not None and isinstance(symbol.node, TypeInfo) and _is_parameter_class(symbol.node):
            return _parameter_value
        return None


def _parameter_value(ctx: FunctionContext) -> Type:
    return AnyType(TypeOfAny.unannotated)


def _is_task(info: TypeInfo) -> bool:
    return any(base.fullname == TASK_FULLNAME for base in info.mro)


def _transform_task_class(ctx: ClassDefContext) -> None:
    """Record the class's parameters (with its bases') and give it the matching ``__init__``."""
    info = ctx.cls.info
    fields = _inherited_fields(info, ctx.api)
    for name, field in _own_fields(ctx).items():
        fields.pop(name, None)  # a redefinition moves to the end, as its creation order does at run time
        fields[name] = field
    info.metadata[METADATA_KEY] = {"fields": [field.serialize() for field in fields.values()]}
    if "__init__" in info.names and not info.names["__init__"].plugin_generated:
        return
    arguments = _init_arguments(list(fields.values()), open_ended=bool(ctx.cls.decorators))
    add_method_to_class(ctx.api, ctx.cls, "__init__", arguments, NoneType())


def _inherited_fields(info: TypeInfo, api: SemanticAnalyzerPluginInterface) -> dict[str, TaskParameterField]:
    fields: dict[str, TaskParameterField] = {}
    for base in reversed(info.mro[1:]):
        stored = base.metadata.get(METADATA_KEY)
        if not stored:
            continue
        for data in stored["fields"]:
            field = TaskParameterField.deserialize(data, api)
            fields.pop(field.name, None)
            fields[field.name] = field
    return fields


def _own_fields(ctx: ClassDefContext) -> dict[str, TaskParameterField]:
    """The parameters assigned in the class body (``name = SomeParameter(...)``)."""
    fields: dict[str, TaskParameterField] = {}
    for statement in ctx.cls.defs.body:
        if not isinstance(statement, AssignmentStmt) or len(statement.lvalues) != 1:
            continue
        target, value = statement.lvalues[0], statement.rvalue
        if not isinstance(target, NameExpr) or not isinstance(value, CallExpr):
            continue
        parameter_class = _parameter_class(value.callee)
        if parameter_class is not None:
            field = _field(target.name, parameter_class, value, ctx.api)
            declared = _declared_type(statement)
            fields[target.name] = field if declared is None else replace(field, type=declared)
    return fields


def _declared_type(statement: AssignmentStmt) -> Type | None:
    """The annotation of ``name: T = SomeParameter(...)`` once analysed, which wins over the inferred type."""
    if statement.type is None or statement.unanalyzed_type is None:
        return None
    declared = get_proper_type(statement.type)
    return None if isinstance(declared, PlaceholderType) else statement.type


def _parameter_class(callee: Expression) -> TypeInfo | None:
    """The TypeInfo of a luigi Parameter class being called, or None for anything else."""
    if not isinstance(callee, RefExpr) or not isinstance(callee.node, TypeInfo):
        return None
    return callee.node if _is_parameter_class(callee.node) else None


def _is_parameter_class(info: TypeInfo) -> bool:
    return any(base.fullname.startswith("luigi.") and base.name == "Parameter" for base in info.mro)


def _field(
    name: str, parameter_class: TypeInfo, call: CallExpr, api: SemanticAnalyzerPluginInterface
) -> TaskParameterField:
    keywords = {arg_name: arg for arg_name, arg in zip(call.arg_names, call.args, strict=True) if arg_name}
    class_names = [base.name for base in parameter_class.mro]
    # Parameter's first positional argument is the default.
    has_default = "default" in keywords or any(arg_name is None for arg_name in call.arg_names)
    has_default = has_default or any(class_name in IMPLICIT_DEFAULT for class_name in class_names)
    positional = True
    positional_arg = keywords.get("positional")
    if isinstance(positional_arg, NameExpr) and positional_arg.fullname == "builtins.False":
        positional = False
    return TaskParameterField(name, _value_type(parameter_class, keywords, api), has_default, positional)


def _value_type(
    parameter_class: TypeInfo, keywords: dict[str, Expression], api: SemanticAnalyzerPluginInterface
) -> Type:
    """The type of the values a parameter class takes (``X | None`` for the Optional* classes)."""
    value: Type = AnyType(TypeOfAny.unannotated)
    for base in parameter_class.mro:
        if base.name in ANY_VALUED:
            break
        if base.name == "EnumParameter":
            enum_class = keywords.get("enum")
            if isinstance(enum_class, RefExpr) and isinstance(enum_class.node, TypeInfo):
                value = Instance(enum_class.node, [])
            break
        if base.name in VALUE_TYPES:
            named = api.named_type_or_none(VALUE_TYPES[base.name], [])
            value = named if named is not None else value
            break
    optional = any(base.name == OPTIONAL_MIXIN for base in parameter_class.mro)
    optional = optional or parameter_class.name.startswith("Optional")
    return UnionType([value, NoneType()]) if optional and not isinstance(value, AnyType) else value


def _init_arguments(fields: list[TaskParameterField], open_ended: bool) -> list[Argument]:
    """Constructor arguments in parameter order; a required one after an optional one is keyword-only."""
    arguments = []
    seen_optional = False
    for field in fields:
        seen_optional = seen_optional or (field.has_default and field.positional)
        if field.positional and (field.has_default or not seen_optional):
            kind = ARG_OPT if field.has_default else ARG_POS
        else:
            kind = ARG_NAMED_OPT if field.has_default else ARG_NAMED
        arguments.append(Argument(Var(field.name, field.type), field.type, None, kind))
    if open_ended:
        anything = AnyType(TypeOfAny.explicit)
        arguments.append(Argument(Var("args", anything), anything, None, ARG_STAR))
        arguments.append(Argument(Var("kwargs", anything), anything, None, ARG_STAR2))
    return _keyword_only_after_star(arguments)


def _keyword_only_after_star(arguments: list[Argument]) -> list[Argument]:
    """Put positional arguments before keyword-only ones, as a signature must be ordered."""
    positional = [a for a in arguments if a.kind in (ARG_POS, ARG_OPT)]
    star = [a for a in arguments if a.kind == ARG_STAR]
    keyword = [a for a in arguments if a.kind in (ARG_NAMED, ARG_NAMED_OPT)]
    star2 = [a for a in arguments if a.kind == ARG_STAR2]
    return positional + star + keyword + star2


def plugin(version: str) -> type[Plugin]:
    """The entry point mypy calls for ``plugins = luigi.mypy``."""
    return TaskPlugin
