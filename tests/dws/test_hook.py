"""corrald's dws hook against corral-dws-emu: every job with #DW directives gets a DWS
Workflow driven through its seven states, its tasks get DW_JOB_*, and every workflow is
gone once its job is; the error paths raise exceptions and still tear down; a restart
of corrald or of the API server strands nothing."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dws_cluster import DwsCluster, wait_until
from dws_emulator import DWS_DATA, data_present

pytestmark = pytest.mark.skipif(not data_present(), reason=f"DWS CRDs not found in {DWS_DATA}")

XFS = "#DW jobdw type=xfs capacity=1GiB name=scratch"
NOBODY = 65534


@pytest.fixture
def dws():
    made = []

    def make(**kw):
        d = DwsCluster(**kw)
        made.append(d)
        return d.start()
    yield make
    for d in made:
        d.stop()


def wait_started(d, jobid):
    wait_until(lambda: "start" in names(d.events(jobid)), timeout=30, what=f"job {jobid} started", cluster=d.c)


def names(events):
    return [e["name"] for e in events]


def timings(events):
    return [e["context"]["state"] for e in events if e["name"] == "dws-timing"]


def test_run_gets_storage_in_every_task_and_the_workflow_is_deleted(dws):
    d = dws()
    p = d.c.corral("run", "-N2", "-n4", "--dw", XFS, "sh", "-c",
                   'echo "$DW_JOB_scratch $DW_JOB_XFS"; test -d "$DW_JOB_scratch" && touch "$DW_JOB_scratch/t$$"')
    lines = p.stdout.split()
    assert len(lines) == 8 and len(set(lines)) == 1 and lines[0].startswith(str(d.emu.mnt)), p.stdout
    ev = d.events(1)
    n = names(ev)
    assert timings(ev) == ["Proposal", "Setup", "DataIn", "PreRun", "PostRun", "DataOut", "Teardown"]
    # The holds are where the seed puts them, in order.
    assert n.index("dependency-add") < n.index("depend") and n.index("prolog-start") < n.index("dws_environment")
    assert n.index("dws_environment") < n.index("prolog-finish") < n.index("start")
    assert n.index("release") < n.index("epilog-start") < n.index("epilog-finish") < n.index("clean")
    env = next(e for e in ev if e["name"] == "dws_environment")["context"]["variables"]
    assert env["DW_JOB_scratch"] == lines[0] and env["DW_JOBS"] == f"scratch:{lines[0]}"
    d.wait_no_workflows()
    assert not Path(lines[0]).exists()  # Teardown freed the file system
    out = d.c.corral("dws", "workflows", "--json").stdout
    assert json.loads(out)["workflows"] == []


def test_batch_job_as_another_user_writes_storage_and_copy_out_lands(dws):
    d = dws()
    results = Path(d.dir) / "results"
    results.mkdir()
    os.chown(results, NOBODY, NOBODY)
    script = Path(d.dir) / "job.sh"
    script.write_text("#!/bin/sh\n"
                      "#CORRAL -N 2\n"
                      "#DW jobdw type=xfs capacity=2GiB name=my-storage\n"
                      f"#DW copy_out source=$DW_JOB_my_storage/ destination={results}/\n"
                      "echo \"written by $(id -u)\" > $DW_JOB_my_storage/answer\n"
                      "ls -ld $DW_JOB_my_storage\n")
    script.chmod(0o644)
    out = d.c.corral("batch", "-o", str(results / "out.txt"), str(script), user=NOBODY).stdout
    jobid = int(out.split()[-1])
    info = d.c.wait_job(jobid, timeout=60)
    assert info["result"] == "COMPLETED", "\n".join(json.dumps(e) for e in d.events(jobid)[-8:])
    assert (results / "answer").read_text() == f"written by {NOBODY}\n"
    assert (results / "answer").stat().st_uid == NOBODY  # copied as the user, not as root
    assert f" {NOBODY} " in (results / "out.txt").read_text() or "nobody" in (results / "out.txt").read_text()
    d.wait_no_workflows()


def test_bad_directives_are_refused_at_submit_naming_the_directive(dws):
    d = dws()
    time.sleep(0.5)  # the rules arrive through the watch
    p = d.c.corral("submit", "--dw", "#DW jobdw type=xfs capacity=1GiB", "true", check=False, user=NOBODY)
    assert p.returncode != 0 and "jobdw" in p.stderr and "name" in p.stderr, p.stderr
    p = d.c.corral("submit", "--dw", "#DW nosuchcommand x=1", "true", check=False, user=NOBODY)
    assert p.returncode != 0 and "nosuchcommand" in p.stderr, p.stderr
    p = d.c.corral("submit", "--dw", "jobdw type=xfs", "true", check=False)
    assert p.returncode != 0 and "#DW" in p.stderr
    many = [a for i in range(40) for a in ("--dw", f"#DW jobdw type=xfs capacity=1GiB name=s{i}")]
    p = d.c.corral("submit", *many, "true", check=False, user=NOBODY)
    assert p.returncode != 0 and "at most 32" in p.stderr, p.stderr
    # A hand-written jobspec: dw of the wrong type.
    spec = {"version": 1, "resources": [{"type": "node", "count": 1, "with": [
        {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"dw": {"not": "a list"}, "cwd": "/"}}}
    p = d.c.corral("submit", "--jobspec", "-", input=json.dumps(spec), check=False, user=NOBODY)
    assert p.returncode != 0 and "attributes.system.dw" in p.stderr, p.stderr
    # Oversized: one directive of 5,000 bytes, and a list of 10,000 directives.
    spec["attributes"]["system"]["dw"] = "#DW jobdw type=xfs capacity=1GiB name=" + "a" * 5000
    p = d.c.corral("submit", "--jobspec", "-", input=json.dumps(spec), check=False, user=NOBODY)
    assert p.returncode != 0 and "longer than 4096 bytes" in p.stderr, p.stderr
    spec["attributes"]["system"]["dw"] = [XFS] * 10000
    p = d.c.corral("submit", "--jobspec", "-", input=json.dumps(spec), check=False, user=NOBODY)
    assert p.returncode != 0 and "at most 32" in p.stderr, p.stderr
    assert d.workflows() == [] and d.c.jobs() == []


def test_error_in_setup_fails_the_job_and_tears_down(dws):
    d = dws()
    d.faults({"state": "Setup", "status": "Error", "message": "rabbit exploded"})
    p = d.c.corral("run", "--dw", XFS, "true", check=False)
    assert p.returncode != 0
    info = d.c.job(1)
    assert info["result"] == "FAILED" and "rabbit exploded" in json.dumps(info), info
    ev = d.events(1)
    assert "start" not in names(ev) and "epilog-finish" in names(ev)
    d.wait_no_workflows()


def test_transient_condition_longer_than_tc_timeout_is_fatal(dws):
    d = dws(sets=("rabbit.tc-timeout=1",))
    d.faults({"state": "DataIn", "status": "TransientCondition", "message": "flaky fabric"})
    t = time.monotonic()
    p = d.c.corral("run", "--dw", XFS, "true", check=False)
    assert p.returncode != 0 and time.monotonic() - t < 15
    assert "TransientCondition" in json.dumps(d.c.job(1))
    d.wait_no_workflows()


def test_short_transient_condition_is_ridden_out(dws):
    d = dws(sets=("rabbit.tc-timeout=5",))
    d.faults({"state": "Setup", "status": "TransientCondition", "message": "blip", "duration": 0.5})
    d.c.corral("run", "--dw", XFS, "true")
    d.wait_no_workflows()


def test_cancel_before_run_goes_straight_to_teardown(dws):
    d = dws()
    d.faults({"state": "Proposal", "delay": 30})
    jobid = d.c.submit("--dw", XFS, "true")
    wait_until(lambda: d.workflow(jobid), what="the workflow", cluster=d.c)
    assert d.c.job(jobid)["state"] == "DEPEND"
    d.c.corral("cancel", str(jobid))
    d.faults()
    d.c.wait_job(jobid, timeout=30)
    ev = d.events(jobid)
    assert "alloc" not in names(ev) and timings(ev)[-1] == "Teardown"
    assert "PostRun" not in timings(ev)
    d.wait_no_workflows()


def test_a_workflow_deleted_by_an_admin_raises_an_exception(dws):
    d = dws()
    jobid = d.c.submit("--dw", XFS, "sleep", "300")
    wait_started(d, jobid)
    d.emu.kubectl("delete", "workflow", f"corral-{jobid}", "--wait=false")
    info = d.c.wait_job(jobid, timeout=30)
    assert info["result"] != "COMPLETED" and "deleted outside corral" in json.dumps(info), info
    d.wait_no_workflows()


def test_admin_teardown_command(dws):
    d = dws()
    jobid = d.c.submit("--dw", XFS, "sleep", "300")
    wait_started(d, jobid)
    p = d.c.corral("dws", "teardown", str(jobid), check=False, user=NOBODY)
    assert p.returncode != 0 and "only root" in p.stderr
    rows = json.loads(d.c.corral("dws", "workflows", "--json").stdout)["workflows"]
    assert rows[0]["jobid"] == jobid and rows[0]["state"] == "PreRun"
    table = d.c.corral("dws", "workflows").stdout
    assert f"corral-{jobid}" in table and "PreRun" in table
    shown = d.c.corral("show", "job", str(jobid)).stdout
    assert f"Storage=PreRun ready [workflow corral-{jobid}]" in shown, shown
    assert d.c.job(jobid)["hooks"]["Storage"].startswith("PreRun ready")
    stats = json.loads(d.c.corral("dws", "stats").stdout)
    assert stats["workflows"] == 1 and stats["watch_lag"]["count"] >= 4
    d.c.corral("dws", "teardown", str(jobid))
    info = d.c.wait_job(jobid, timeout=30)
    assert "administrator tore down" in json.dumps(info)
    d.wait_no_workflows()


def test_epilog_timeout_aborts_drains_mounted_nodes_and_disables_rabbits(dws):
    d = dws(sets=("rabbit.epilog-timeout=1",))
    d.faults({"state": "PostRun", "delay": 60})
    p = d.c.corral("run", "-N2", "--dw", XFS, "true", check=False)
    info = d.c.wait_job(1, timeout=20)
    assert "dws-epilog-timeout" in json.dumps(info), info
    wait_until(lambda: d.c.node("node0")["state"] in ("drained", "draining") or "drain" in json.dumps(d.c.node("node0")),
               what="node0 drained", cluster=d.c)
    code, st = d.emu.request("GET", "/apis/dataworkflowservices.github.io/v1alpha7/namespaces/default/storages/rabbit0")
    assert st["spec"]["state"] == "Disabled" and "timed out" in st["metadata"]["annotations"]["disable_reason"]
    assert p.returncode is not None


@pytest.mark.parametrize("state", ["Proposal", "Setup", "PreRun", "running", "PostRun", "DataOut", "Teardown"])
def test_kill_corrald_in_every_state_strands_nothing(dws, state):
    d = dws()
    if state != "running":
        d.faults({"state": state, "delay": 1.5})
    jobid = d.c.submit("--dw", XFS, "sh", "-c", "sleep 2" if state == "running" else "true")
    want = "PreRun" if state == "running" else state

    def reached():
        w = d.workflow(jobid)
        if not w or w["spec"]["desiredState"] != want:
            return False
        return state != "running" or d.c.job(jobid)["state"] == "RUN"
    wait_until(reached, timeout=30, what=f"workflow in {want}", cluster=d.c)
    d.c.kill_controller()
    d.c.restart_controller()
    info = d.c.wait_job(jobid, timeout=40)
    assert info["result"] == "COMPLETED", (info, d.c.logs())
    ev = d.events(jobid)
    assert names(ev).count("dws_environment") == 1 and "exception" not in names(ev)
    d.wait_no_workflows()


def test_restart_deletes_workflows_no_live_job_owns(dws, tmp_path):
    d = dws()
    d.c.corral("run", "--dw", XFS, "true")
    d.wait_no_workflows()
    # A leftover from a lost state: ours (our finalizer and name) but no job of corrald's.
    orphan = {"apiVersion": "dataworkflowservices.github.io/v1alpha7", "kind": "Workflow",
              "metadata": {"name": "corral-777", "finalizers": ["corral.dev/workflow"]},
              "spec": {"desiredState": "Proposal", "wlmID": "corral", "jobID": "777", "userID": 0, "groupID": 0,
                       "dwDirectives": [XFS]}}
    code, body = d.emu.request("POST", "/apis/dataworkflowservices.github.io/v1alpha7/namespaces/default/workflows",
                               orphan)
    assert code == 201, body
    # Someone else's workflow is left alone.
    other = json.loads(json.dumps(orphan))
    other["metadata"] = {"name": "fluxjob-5"}
    assert d.emu.request("POST", "/apis/dataworkflowservices.github.io/v1alpha7/namespaces/default/workflows",
                         other)[0] == 201
    d.c.kill_controller()
    d.c.restart_controller()
    wait_until(lambda: [w["metadata"]["name"] for w in d.workflows()] == ["fluxjob-5"], timeout=20,
               what="the orphan deleted", cluster=d.c)


def test_api_server_restart_and_cut_watches_are_survived(dws):
    d = dws()
    d.faults({"state": "DataIn", "delay": 1})
    jobid = d.c.submit("--dw", XFS, "true")
    wait_until(lambda: (d.workflow(jobid) or {}).get("spec", {}).get("desiredState") == "DataIn", timeout=20,
               what="DataIn", cluster=d.c)
    d.emu.admin("watches/cut", {})
    d.emu.stop(signal.SIGKILL)
    time.sleep(0.5)
    d.emu.start()
    info = d.c.wait_job(jobid, timeout=40)
    assert info["result"] == "COMPLETED", (info, d.c.logs())
    d.wait_no_workflows()


def test_copy_in_lands_before_the_tasks_start(dws):
    d = dws()
    src = Path(d.dir) / "input"
    src.mkdir()
    (src / "data.txt").write_text("staged in\n")
    p = d.c.corral("run", "--dw", "#DW jobdw type=xfs capacity=1GiB name=stage",
                   "--dw", f"#DW copy_in source={src}/ destination=$DW_JOB_stage/", "sh", "-c", 'cat "$DW_JOB_stage/data.txt"')
    assert p.stdout == "staged in\n", (p.stdout, p.stderr)
    d.wait_no_workflows()


def test_a_failed_mount_fails_the_job_with_its_reason(dws):
    d = dws()
    d.faults({"state": "PreRun", "mountFail": "node1", "message": "nvme link down"})
    p = d.c.corral("run", "-N2", "--dw", XFS, "true", check=False)
    assert p.returncode != 0
    info = d.c.job(1)
    assert "nvme link down" in json.dumps(info) and info["result"] == "FAILED", info
    assert "start" not in names(d.events(1))
    d.wait_no_workflows()


def test_a_requeued_job_fails_instead_of_waiting_for_storage_that_is_gone(dws):
    d = dws(agents=4)  # one agent per node: losing one is a node failure
    out = Path(d.dir) / "out"
    out.mkdir()
    jobid = d.c.submit("--requeue", "-o", f"{out}/job", "--dw", XFS, "sleep", "300")
    wait_started(d, jobid)
    node = d.c.job(jobid)["nodelist"]
    d.c.kill_agent(int(node.removeprefix("node")))
    info = d.c.wait_job(jobid, timeout=40)
    assert "requeue" in names(d.events(jobid)), names(d.events(jobid))
    assert "torn down with its previous run" in json.dumps(info), info
    assert info["result"] == "FAILED" and names(d.events(jobid)).count("start") == 1
    d.wait_no_workflows()
