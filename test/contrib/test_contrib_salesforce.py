"""luigi.contrib.salesforce through luigi.build, against a stand-in org that answers Salesforce's SOAP
login, REST query and Bulk API calls (test/helpers/salesforce_standin.py; no org is reachable here)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("responses")

from helpers.salesforce_standin import SalesforceStandIn, salesforce_standin  # noqa: E402

import luigi  # noqa: E402
from luigi.contrib import salesforce  # noqa: E402

ACCOUNTS = [
    {"Id": f"001{n:03d}", "Name": f"Account {n}", "Owner": {"Name": f"Owner {n % 3}"}} for n in range(7)
]


@pytest.fixture
def org(monkeypatch: pytest.MonkeyPatch) -> Iterator[SalesforceStandIn]:
    monkeypatch.setattr(salesforce.time, "sleep", lambda seconds: None)  # the batch moves on each look
    with salesforce_standin(records={"Account": ACCOUNTS}) as standin:
        config = luigi.configuration.get_config()
        for key, value in (
            ("username", standin.username), ("password", standin.password),
            ("security_token", standin.token),
        ):
            config.set("salesforce", key, value)
        yield standin
        for key in ("username", "password", "security_token"):
            config.remove_option("salesforce", key)


class Accounts(salesforce.QuerySalesforce):
    out = luigi.Parameter()
    soql = "SELECT Id, Name FROM Account"
    object_name = "Account"

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.out)


class AccountOwners(Accounts):
    soql = "SELECT Id, Owner.Name FROM Account"


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as file:
        return list(csv.reader(file))


def test_a_bulk_query_writes_its_csv_and_closes_its_job(org: SalesforceStandIn, tmp_path: Path) -> None:
    out = tmp_path / "accounts.csv"
    assert luigi.build([Accounts(out=str(out))], local_scheduler=True)
    assert _rows(out) == [["Id", "Name"]] + [[a["Id"], a["Name"]] for a in ACCOUNTS]
    (job,) = org.jobs.values()
    assert (job["operation"], job["object"], job["contentType"], job["state"]) == (
        "query", "Account", "CSV", "Closed"
    )


def test_several_result_files_are_merged_with_one_header(org: SalesforceStandIn, tmp_path: Path) -> None:
    org.rows_per_result = 3
    out = tmp_path / "accounts.csv"
    assert luigi.build([Accounts(out=str(out))], local_scheduler=True)
    assert _rows(out) == [["Id", "Name"]] + [[a["Id"], a["Name"]] for a in ACCOUNTS]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["accounts.csv"]  # the parts are gone


def test_relations_the_bulk_api_refuses_are_read_through_rest_pages(
    org: SalesforceStandIn, tmp_path: Path
) -> None:
    org.bulk_cannot_follow.add("Account")
    org.rows_per_page = 3
    out = tmp_path / "owners.csv"
    assert luigi.build([AccountOwners(out=str(out))], local_scheduler=True)
    assert _rows(out) == [["Id", "Owner.Name"]] + [[a["Id"], a["Owner"]["Name"]] for a in ACCOUNTS]


def test_a_failed_batch_fails_the_task_with_salesforces_message_and_writes_nothing(
    org: SalesforceStandIn, tmp_path: Path
) -> None:
    class Bogus(Accounts):
        soql = "SELECT Id, Bogus FROM Account"

    out = tmp_path / "bogus.csv"
    failures: list[BaseException] = []
    Bogus.event_handler(luigi.Event.FAILURE)(lambda task, error: failures.append(error))
    assert not luigi.build([Bogus(out=str(out))], local_scheduler=True)
    assert "No such column 'Bogus' on entity 'Account'" in str(failures[0])
    assert not out.exists()
    assert [job["state"] for job in org.jobs.values()] == ["Closed"]


def test_a_wrong_password_fails_with_the_login_fault(org: SalesforceStandIn, tmp_path: Path) -> None:
    luigi.configuration.get_config().set("salesforce", "password", "wrong")
    failures: list[BaseException] = []

    class WrongLogin(Accounts):
        pass

    WrongLogin.event_handler(luigi.Event.FAILURE)(lambda task, error: failures.append(error))
    assert not luigi.build([WrongLogin(out=str(tmp_path / "x.csv"))], local_scheduler=True)
    assert "INVALID_LOGIN" in str(failures[0]) and "wrong" not in str(failures[0])


def test_a_sandbox_logs_in_at_test_with_the_sandbox_user_and_token(org: SalesforceStandIn) -> None:
    org.username, org.token = "etl@example.com.uat", "SBTOKEN"
    api = salesforce.SalesforceAPI("etl@example.com", org.password, "TOKEN123", "SBTOKEN", "uat")
    api.start_session()
    assert org.logins == ["etl@example.com.uat"] and api.hostname == "standin.my.salesforce.com"
    assert "pw-secret" not in repr(api) and org.session not in repr(api)


def test_the_api_calls_return_luigis_shapes(org: SalesforceStandIn) -> None:
    org.rows_per_result = 3
    api = salesforce.SalesforceAPI(org.username, org.password, org.token)
    job = api.create_operation_job("query", "Account", content_type="CSV")
    batch = api.create_batch(job, "SELECT Id FROM Account", "CSV")
    status = api.block_on_batch(job, batch, sleep_time_seconds=0)
    assert status == {"state": "Completed", "num_processed": "0", "num_failed": "0"}
    ids = api.get_batch_result_ids(job, batch)
    assert ids == [f"{batch}-r0", f"{batch}-r1", f"{batch}-r2"]
    with pytest.warns(UserWarning, match="use get_batch_result_ids"):
        assert api.get_batch_results(job, batch) == ids[0]
    assert api.get_batch_result(job, batch, ids[2]) == b"Id\n001006\n"
    api.close_job(job)
    with pytest.raises(Exception, match="InvalidJobState"):
        api.create_batch(job, "SELECT Id FROM Account", "CSV")


def test_block_on_batch_gives_up_after_its_limit(org: SalesforceStandIn) -> None:
    api = salesforce.SalesforceAPI(org.username, org.password, org.token)
    job = api.create_operation_job("query", "Account", content_type="CSV")
    batch = api.create_batch(job, "SELECT Id FROM Account", "CSV")
    with pytest.raises(Exception, match="still Queued"):
        api.block_on_batch(job, batch, sleep_time_seconds=0, max_wait_time_seconds=0)


def test_soql_fields_and_result_parsing() -> None:
    assert salesforce.get_soql_fields("SELECT Id,\n\tName , Owner.Name\nFROM Account") == [
        "Id", "Name", "Owner.Name"
    ]
    record = {"attributes": {"type": "Account"}, "Id": "1", "Owner": {"attributes": {}, "Name": "Z"}}
    data = {"records": [record]}
    assert salesforce.parse_results(["Id", "owner.name"], data) == [["1", "Z"]]
    assert salesforce.ensure_utf("é") == "é".encode() and salesforce.ensure_utf(b"x") == b"x"


def test_merging_results_of_another_type_is_refused(tmp_path: Path) -> None:
    class Xml(Accounts):
        content_type = "XML"

    with pytest.raises(Exception, match="Batch result merging not implemented for XML"):
        Xml(out=str(tmp_path / "x")).merge_batch_results(["a", "b"])


def test_a_sandbox_without_a_name_is_refused(tmp_path: Path) -> None:
    class Sandboxed(Accounts):
        use_sandbox = True

    with pytest.raises(Exception, match="sandbox_name must be provided"):
        Sandboxed(out=str(tmp_path / "x")).run()
