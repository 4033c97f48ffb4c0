"""A mypy plugin that types the constructor of every ``Task`` from the parameters declared on it.

Enable it in the mypy configuration::

    [mypy]
    plugins = luigi.mypy

Then, for ``class Report(luigi.Task)`` declaring ``day = luigi.DateParameter()`` and
``copies = luigi.IntParameter(default=1)``, mypy checks ``Report(day=date(2024, 1, 1), copies=2)`` as a
call to ``__init__(self, day: date, copies: int = ...)``: a missing ``day``, a ``copies="2"`` or an unknown
keyword is reported. Parameters are inherited along the class hierarchy.

An argument's type is the parameter's value type, the one ``self.day`` has (what ``Parameter.__get__``
returns on an instance: ``IntParameter`` -> ``int``, ``OptionalIntParameter`` -> ``int | None``,
``EnumParameter(enum=Color)`` -> ``Color``, ...), widened to what the parameter turns into that value: any
sequence where the value is a tuple, a string where it is a path. An annotation that names the value
(``size: int = luigi.IntParameter()``) wins, and that assignment is accepted. A ``default`` (or the
implicit one of ``BoolParameter`` and the ``Optional*`` classes) makes the argument optional;
``positional=False`` makes it keyword-only. A class with its own ``__init__`` keeps it; a decorated class
(``@requires``, ``@inherits``, which add parameters at run time) also accepts further arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

# mypy.types first: importing mypy.expandtype or mypy.maptype before it is an import cycle inside mypy
# (harmless while mypy runs the plugin, an error for a plain `import luigi.mypy`).
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    NoneType,
    Overloaded,
    PlaceholderType,
    Type,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

# isort: split
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
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
    CastExpr,
    Expression,
    FloatExpr,
    IntExpr,
    ListExpr,
    NameExpr,
    RefExpr,
    SetExpr,
    StrExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import ClassDefContext, Plugin, SemanticAnalyzerPluginInterface
from mypy.plugins.common import add_method_to_class, deserialize_and_fixup_type

__all__ = ["TaskPlugin", "plugin"]

TASK_FULLNAME = "luigi.task.Task"
METADATA_KEY = "luigi"
# Parameter classes whose constructor supplies a default when none is given (False, None).
IMPLICIT_DEFAULT = frozenset({"BoolParameter", "OptionalParameterMixin"})
# Keywords that fix the value type of a generic parameter class, in the order they are looked at.
TYPE_KEYWORDS = ("enum", "choices", "var_type")
LITERAL_TYPES = {StrExpr: "builtins.str", IntExpr: "builtins.int", FloatExpr: "builtins.float"}


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
        if isinstance(value, CastExpr):  # wrapped by an earlier pass over this class (see below)
            value = value.expr
        if not isinstance(target, NameExpr) or not isinstance(value, CallExpr):
            continue
        parameter_class = _parameter_class(value.callee)
        if parameter_class is not None:
            field = _field(target.name, parameter_class, value, ctx.api)
            fields[target.name] = _with_declared_type(statement, value, field, ctx.api)
    return fields


def _with_declared_type(
    statement: AssignmentStmt, call: CallExpr, field: TaskParameterField, api: SemanticAnalyzerPluginInterface
) -> TaskParameterField:
    """The field as the annotation of ``name: T = SomeParameter(...)`` says, if it has one.

    An annotation naming a parameter type (``start: Parameter[Any] = ...``) gives that parameter's value
    type. One naming the value (``size: int = IntParameter()``) is the argument's type, and the call is
    read as that type, so that mypy accepts the assignment.
    """
    declared = _declared_type(statement)
    if declared is None:
        return field
    proper = get_proper_type(declared)
    if isinstance(proper, Instance) and _is_parameter_class(proper.type):
        return replace(field, type=_accepted_type(_descriptor_value(proper), api))
    wrapped = CastExpr(call, declared)
    wrapped.set_line(call)
    statement.rvalue = wrapped
    return replace(field, type=declared)


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
    parameter = Instance(parameter_class, _type_arguments(parameter_class, keywords, api))
    value = _accepted_type(_descriptor_value(parameter), api)
    return TaskParameterField(name, value, has_default, positional)


def _type_arguments(
    parameter_class: TypeInfo, keywords: dict[str, Expression], api: SemanticAnalyzerPluginInterface
) -> list[Type]:
    """The type arguments of a call to a generic parameter class, as far as its arguments show them.

    Each generic parameter class has one type variable, its value (or item) type, fixed by ``enum=``,
    ``choices=`` or ``var_type=``; a class given none of them has its variable's default (``str`` for
    ``Parameter``), and one given a value whose type cannot be read here has Any.
    """
    type_vars = parameter_class.defn.type_vars
    if not type_vars:
        return []
    given = [keywords[keyword] for keyword in TYPE_KEYWORDS if keyword in keywords]
    if given:
        first: Type = _expression_type(given[0], api)
    elif type_vars[0].has_default():
        first = type_vars[0].default
    else:
        first = AnyType(TypeOfAny.unannotated)
    return [first] + [AnyType(TypeOfAny.unannotated)] * (len(type_vars) - 1)


def _expression_type(expression: Expression, api: SemanticAnalyzerPluginInterface) -> Type:
    """The type an ``enum=``/``var_type=`` class makes, or the type of a ``choices=`` literal's items."""
    if isinstance(expression, RefExpr) and isinstance(expression.node, TypeInfo):
        info = expression.node
        return Instance(info, [AnyType(TypeOfAny.unannotated)] * len(info.defn.type_vars))
    if isinstance(expression, (ListExpr, TupleExpr, SetExpr)):
        names = {LITERAL_TYPES.get(type(item)) for item in expression.items}
        name = names.pop() if len(names) == 1 else None
        named = api.named_type_or_none(name, []) if name is not None else None
        if named is not None:
            return named
    return AnyType(TypeOfAny.unannotated)


def _descriptor_value(parameter: Instance) -> Type:
    """What the parameter gives when read on a task: the return type of ``__get__`` for an instance."""
    getter = parameter.type.get_method("__get__")
    signature = get_proper_type(getter.type) if getter is not None else None
    items = [signature] if isinstance(signature, CallableType) else []
    items = signature.items if isinstance(signature, Overloaded) else items
    for item in items:
        read_on_instance = len(item.arg_types) > 1 and not isinstance(
            get_proper_type(item.arg_types[1]), NoneType
        )
        if getter is not None and read_on_instance:
            owner = map_instance_to_supertype(parameter, getter.info)
            return expand_type_by_instance(item.ret_type, owner)
    return AnyType(TypeOfAny.unannotated)


def _accepted_type(value: Type, api: SemanticAnalyzerPluginInterface) -> Type:
    """What a constructor takes for a value of type ``value``: a tuple's values may come as any sequence
    (the parameter makes it a tuple), a path's as a string too."""
    proper = get_proper_type(value)
    if isinstance(proper, UnionType):
        return UnionType([_accepted_type(item, api) for item in proper.items])
    if isinstance(proper, Instance) and proper.type.fullname == "builtins.tuple":
        sequence = api.named_type_or_none("typing.Sequence", list(proper.args))
        return value if sequence is None else sequence
    if isinstance(proper, Instance) and proper.type.fullname == "pathlib.Path":
        text = api.named_type_or_none("os.PathLike", [api.named_type("builtins.str")])
        return value if text is None else UnionType([api.named_type("builtins.str"), text])
    return value


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
