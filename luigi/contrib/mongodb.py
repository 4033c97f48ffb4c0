"""Targets in MongoDB: a field of one document, a field over many documents, a collection, a count.

Each target takes the user's own ``pymongo.MongoClient`` (or anything with its API), the database name
(``index``) and the collection name, as Luigi's do. They work with pymongo 4: the collection check uses
``list_collection_names()`` and range writes use ``bulk_write`` (pymongo 3's ``collection_names()`` and
``initialize_ordered_bulk_op()`` are gone). Range writes need the ``pymongo`` package for its
``UpdateOne`` operation: ``pip install 'luigi[mongodb]'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from luigi.contrib.optional import require
from luigi.target import Target

__all__ = [
    "MongoCellTarget",
    "MongoCollectionTarget",
    "MongoCountTarget",
    "MongoRangeTarget",
    "MongoTarget",
]


class MongoTarget(Target):
    """The collection ``collection`` of database ``index``, reached through ``mongo_client``."""

    def __init__(self, mongo_client: Any, index: str, collection: str) -> None:
        self._mongo_client = mongo_client
        self._index = index
        self._collection = collection

    def __str__(self) -> str:
        return f"{self._index}/{self._collection}"

    def get_collection(self) -> Any:
        """The pymongo collection this target is about."""
        return self._mongo_client[self._index][self._collection]

    def get_index(self) -> Any:
        """The pymongo database this target is about."""
        return self._mongo_client[self._index]


class MongoCellTarget(MongoTarget):
    """The value at the dotted ``path`` of the document ``document_id``; it exists once that value is set."""

    def __init__(
        self, mongo_client: Any, index: str, collection: str, document_id: Any, path: str
    ) -> None:
        super().__init__(mongo_client, index, collection)
        self._document_id = document_id
        self._path = path

    def exists(self) -> bool:
        return self.read() is not None

    def read(self) -> Any:
        """The value at the path, or None when the document or the path is missing."""
        found = self.get_collection().aggregate(
            [
                {"$match": {"_id": self._document_id}},
                {"$project": {"_value": "$" + self._path, "_id": False}},
            ]
        )
        for document in found:
            return document.get("_value")
        return None

    def write(self, value: Any) -> None:
        """Set the value at the path, creating the document when it does not exist yet."""
        self.get_collection().update_one(
            {"_id": self._document_id}, {"$set": {self._path: value}}, upsert=True
        )


class MongoRangeTarget(MongoTarget):
    """The ``field`` of each document in ``document_ids``; it exists once every one of them has it."""

    def __init__(
        self, mongo_client: Any, index: str, collection: str, document_ids: Iterable[Any], field: str
    ) -> None:
        super().__init__(mongo_client, index, collection)
        self._document_ids = list(document_ids)
        self._field = field

    def exists(self) -> bool:
        return not self.get_empty_ids()

    def read(self) -> dict[Any, Any]:
        """``{document id: value}`` for the targeted documents that have the field."""
        cursor = self.get_collection().find(
            {"_id": {"$in": self._document_ids}, self._field: {"$exists": True}},
            {self._field: True},
        )
        return {document["_id"]: document[self._field] for document in cursor}

    def write(self, values: Mapping[Any, Any]) -> Any:
        """Set the field of each targeted document from ``values`` (other ids are ignored), in one
        ordered bulk write; documents that do not exist yet are created."""
        wanted = set(self._document_ids)
        pymongo = require("pymongo", "mongodb", "luigi.contrib.mongodb.MongoRangeTarget.write")
        updates = [
            pymongo.UpdateOne({"_id": key}, {"$set": {self._field: value}}, upsert=True)
            for key, value in values.items()
            if key in wanted
        ]
        if not updates:
            return None
        return self.get_collection().bulk_write(updates, ordered=True)

    def get_empty_ids(self) -> set[Any]:
        """The targeted document ids whose field is not set."""
        return set(self._document_ids) - set(self.read())


class MongoCollectionTarget(MongoTarget):
    """The collection itself: it exists once the database has a collection of that name."""

    def exists(self) -> bool:
        return self.read()

    def read(self) -> bool:
        """Whether the collection exists in its database."""
        return self._collection in self.get_index().list_collection_names()


class MongoCountTarget(MongoTarget):
    """The collection holding exactly ``target_count`` documents."""

    def __init__(self, mongo_client: Any, index: str, collection: str, target_count: int) -> None:
        super().__init__(mongo_client, index, collection)
        self._target_count = target_count

    def exists(self) -> bool:
        return self.read() == self._target_count

    def read(self) -> int | None:
        """The number of documents in the collection, or None when it has none."""
        counted = self.get_collection().aggregate(
            [{"$group": {"_id": None, "count": {"$sum": 1}}}]
        )
        for document in counted:
            return int(document["count"])
        return None
