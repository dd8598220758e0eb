"""corral-dws-emu against clients nobody here wrote: Debian's kubectl and the official
Kubernetes Python client (python3-kubernetes), as flux-coral2 uses it."""
import json
import os
import shutil
import signal

import pytest

from dws_emulator import GROUP, VERSION, Emulator, data_present, wait_for, DWS_DATA

pytestmark = pytest.mark.skipif(not data_present(), reason=f"DWS CRDs not found in {DWS_DATA}")

kubernetes = pytest.importorskip("kubernetes", reason="python3-kubernetes is not installed")
from kubernetes import client, config, watch  # noqa: E402


def workflow(name, directives, job=7, uid=1000, state="Proposal"):
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow", "metadata": {"name": name},
            "spec": {"desiredState": state, "wlmID": "corral", "jobID": job, "userID": uid, "groupID": uid,
                     "dwDirectives": directives}}


def jsonpath_is(emu, what, path, value):
    """`kubectl get -o jsonpath` until it shows `value` (Debian's kubectl 1.20 has no
    `wait --for=jsonpath`)."""
    wait_for(lambda: emu.kubectl("get", what, "-o", f"jsonpath={path}").stdout == value, 10, f"{what} {path}={value}")


@pytest.fixture
def emu(tmp_path):
    e = Emulator(tmp_path).start()
    yield e
    e.stop()


def api_of(emu):
    c = config.new_client_from_config(str(emu.kubeconfig))
    return client.CustomObjectsApi(c)


def get(api, plural, name, ns="default"):
    return api.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)


def patch(api, name, body, plural="workflows", ns="default"):
    return api.patch_namespaced_custom_object(GROUP, VERSION, ns, plural, name, body)


def ready_in(api, name, state, timeout=10):
    def ok():
        st = get(api, "workflows", name).get("status", {})
        return st.get("state") == state and st.get("ready") is True
    wait_for(ok, timeout, f"{name} ready in {state}")


def test_kubectl_sees_the_kinds_and_printer_columns(emu):
    out = emu.kubectl("api-resources", "--api-group", GROUP).stdout
    for plural in ("workflows", "directivebreakdowns", "servers", "computes", "storages", "clientmounts"):
        assert plural in out
    storages = emu.kubectl("get", "storages", "-A").stdout
    assert "rabbit0" in storages and "Enabled" in storages and "Ready" in storages
    rules = emu.kubectl("get", "dwdirectiverules", "-n", "dws-system", "-o", "json").stdout
    assert json.loads(rules)["items"][0]["spec"][0]["command"] == "jobdw"
    desc = emu.kubectl("describe", "storage", "rabbit0").stdout
    assert "node3" in desc and "PCIe" in desc


def test_kubectl_create_patch_wait_and_the_webhook(emu, tmp_path):
    f = tmp_path / "wf.json"
    f.write_text(json.dumps(workflow("wf1", ["#DW jobdw type=xfs capacity=1GiB name=scratch"])))
    # --validate=false: Debian's own kubectl (1.20) would fetch the protobuf OpenAPI
    # document to check fields on the client; the server checks them anyway.
    assert "created" in emu.kubectl("create", "--validate=false", "-f", str(f)).stdout
    jsonpath_is(emu, "workflow/wf1", "{.status.ready}", "true")
    table = emu.kubectl("get", "workflows", "-A").stdout
    assert "Proposal" in table and "Completed" in table and "wf1" in table
    # Skipping a state, a lower-case state, an identity change: refused as DWS refuses them.
    p = emu.kubectl("patch", "workflow", "wf1", "--type=merge", "-p", '{"spec":{"desiredState":"PreRun"}}', check=False)
    assert p.returncode != 0 and 'admission webhook "vworkflow.kb.io" denied the request' in p.stderr
    assert "states cannot be skipped" in p.stderr
    p = emu.kubectl("patch", "workflow", "wf1", "--type=merge", "-p", '{"spec":{"desiredState":"setup"}}', check=False)
    assert 'The Workflow "wf1" is invalid: spec.desiredState: Unsupported value: "setup"' in p.stderr
    p = emu.kubectl("patch", "workflow", "wf1", "--type=json", "-p",
                    '[{"op":"replace","path":"/spec/userID","value":5}]', check=False)
    assert "field is immutable" in p.stderr
    p = emu.kubectl("patch", "workflow", "wf1", "--type=merge", "-p", '{"spec":{"hurry":true}}', check=False)
    assert "hurry" in p.stderr
    # A bad directive names itself; a workflow must start in Proposal; unknown fields are refused.
    f.write_text(json.dumps(workflow("wf2", ["#DW jobdw type=xfs capacity=1GiB name=Bad"])))
    p = emu.kubectl("create", "--validate=false", "-f", str(f), check=False)
    assert "argument 'name' invalid string 'Bad'" in p.stderr
    f.write_text(json.dumps(workflow("wf3", [], state="Setup")))
    p = emu.kubectl("create", "--validate=false", "-f", str(f), check=False)
    assert "desired state must start in Proposal" in p.stderr
    # An unknown field is dropped, or refused when the client asks for strict validation.
    bad = workflow("wf4", [])
    bad["spec"]["wlmId"] = "typo"
    code, body = emu.request("POST", f"/apis/{GROUP}/{VERSION}/namespaces/default/workflows?fieldValidation=Strict", bad)
    assert code == 400 and 'strict decoding error: unknown field "spec.wlmId"' in body["message"]
    code, body = emu.request("POST", f"/apis/{GROUP}/{VERSION}/namespaces/default/workflows", bad)
    assert code == 201 and "wlmId" not in body["spec"]
    del bad["spec"]["wlmId"], bad["spec"]["wlmID"]
    bad["metadata"]["name"] = "wf5"
    code, body = emu.request("POST", f"/apis/{GROUP}/{VERSION}/namespaces/default/workflows", bad)
    assert code == 422 and 'Workflow.dataworkflowservices.github.io "wf5" is invalid: spec.wlmID: Required value' == body["message"]
    # Teardown from anywhere, then no way back; delete waits for DWS's finalizer.
    emu.kubectl("patch", "workflow", "wf1", "--type=merge", "-p", '{"spec":{"desiredState":"Teardown","hurry":true}}')
    jsonpath_is(emu, "workflow/wf1", "{.status.state}", "Teardown")
    p = emu.kubectl("patch", "workflow", "wf1", "--type=merge", "-p", '{"spec":{"desiredState":"Setup","hurry":false}}',
                    check=False)
    assert "cannot progress backwards" in p.stderr
    emu.kubectl("delete", "workflow", "wf1", "--wait=false")
    wait_for(lambda: "wf1" not in emu.kubectl("get", "workflows", "-o", "name").stdout, 10, "wf1 deleted")
    # Its children went with it (owner references).
    assert "wf1" not in emu.kubectl("get", "directivebreakdowns,servers,computes", "-A").stdout


def test_python_client_list_watch_patch(emu):
    api = api_of(emu)
    api.create_namespaced_custom_object(GROUP, VERSION, "default", "workflows",
                                        workflow("py1", ["#DW jobdw type=gfs2 capacity=10GiB name=gg"], job="fABC"))
    seen = []
    w = watch.Watch()
    for ev in w.stream(api.list_namespaced_custom_object, GROUP, VERSION, "default", "workflows",
                       field_selector="metadata.name=py1", timeout_seconds=10):
        st = ev["object"].get("status", {})
        seen.append((ev["type"], st.get("state"), st.get("ready")))
        if st.get("state") == "Proposal" and st.get("ready"):
            w.stop()
    assert seen[-1] == (seen[-1][0], "Proposal", True)
    dbd = get(api, "directivebreakdowns", "py1-0")
    sets = dbd["status"]["storage"]["allocationSets"]
    assert sets[0]["allocationStrategy"] == "AllocatePerCompute" and sets[0]["label"] == "gfs2"
    assert sets[0]["minimumCapacity"] == 10 * 2**30 + 300 * 2**20
    access = dbd["status"]["compute"]["constraints"]["location"][0]["access"]
    assert {"type": "network", "priority": "mandatory"} in access
    # Label selectors: the children carry the workflow's labels.
    lst = api.list_cluster_custom_object(GROUP, VERSION, "servers",
                                         label_selector=f"{GROUP}/workflow.name=py1")
    assert [i["metadata"]["name"] for i in lst["items"]] == ["py1-0"]
    # A stale full update conflicts (409); a merge patch without a version does not.
    wf = get(api, "workflows", "py1")
    wf["metadata"]["resourceVersion"] = "1"
    with pytest.raises(client.exceptions.ApiException) as e:
        api.replace_namespaced_custom_object(GROUP, VERSION, "default", "workflows", "py1", wf)
    assert e.value.status == 409
    patch(api, "py1", {"metadata": {"labels": {"x": "y"}}})
    # Workflow has no /status subresource; Servers has one.
    with pytest.raises(client.exceptions.ApiException) as e:
        api.get_namespaced_custom_object_status(GROUP, VERSION, "default", "workflows", "py1")
    assert e.value.status == 404
    api.patch_namespaced_custom_object_status(GROUP, VERSION, "default", "servers", "py1-0",
                                              {"status": {"ready": False}})
    srv = api.patch_namespaced_custom_object(GROUP, VERSION, "default", "servers", "py1-0",
                                             {"status": {"ready": True}, "spec": {"allocationSets": []}})
    assert srv["status"]["ready"] is False  # the main resource does not write status


def test_hostile_requests_are_refused_and_change_nothing(emu):
    base = f"/apis/{GROUP}/{VERSION}/namespaces/default/workflows"
    deep = json.dumps(workflow("deep", [])).replace('"spec": {', '"spec": {"x": ' + '{"a": ' * 5000 + '1' + '}' * 5000 + ', ', 1)
    code, body = emu.request("POST", base, deep)
    assert code == 400 and "nested deeper than 100 levels" in body["message"]
    big = workflow("big", ["#DW jobdw type=xfs capacity=1GiB name=" + "a" * (4 << 20)])
    code, body = emu.request("POST", base, big)
    assert code == 413
    code, body = emu.request("POST", base, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert code == 400 and "do not match" in body["message"]
    code, body = emu.request("POST", base, workflow("UPPER", []))
    assert code == 422 and "RFC 1123" in body["message"]
    code, body = emu.request("GET", f"{base}?labelSelector=a%20in%20(b")
    assert code == 400
    code, body = emu.request("GET", f"{base}?fieldSelector=spec.jobID%3D1")
    assert code == 400 and "field label not supported: spec.jobID" in body["message"]
    code, body = emu.request("GET", base)
    assert code == 200 and body["items"] == []
    assert emu.proc.poll() is None  # still serving


def test_token_is_required(emu):
    import ssl
    import urllib.error
    import urllib.request
    ctx = ssl._create_unverified_context()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{emu.url}/apis/{GROUP}/{VERSION}/workflows", context=ctx)
    assert e.value.code == 401 and json.loads(e.value.read())["reason"] == "Unauthorized"


def test_watch_resumes_and_too_old_is_410(tmp_path):
    emu = Emulator(tmp_path, extra=["--history", "20"]).start()
    try:
        api = api_of(emu)
        first = api.list_namespaced_custom_object(GROUP, VERSION, "default", "workflows")["metadata"]["resourceVersion"]
        for i in range(8):
            api.create_namespaced_custom_object(GROUP, VERSION, "default", "workflows", workflow(f"w{i}", []))
        wait_for(lambda: all(get(api, "workflows", f"w{i}").get("status", {}).get("ready") for i in range(8)))
        r = api.list_namespaced_custom_object(GROUP, VERSION, "default", "workflows", watch=True,
                                              resource_version=first, timeout_seconds=1, _preload_content=False)
        line = next(r.stream()).decode().splitlines()[0]
        ev = json.loads(line)
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    finally:
        emu.stop()


def test_state_survives_restart_and_faults(tmp_path):
    emu = Emulator(tmp_path).start()
    api = api_of(emu)
    api.create_namespaced_custom_object(GROUP, VERSION, "default", "workflows", workflow("keep", []))
    ready_in(api, "keep", "Proposal")
    emu.stop(signal.SIGKILL)
    emu.start()
    api = api_of(emu)
    assert get(api, "workflows", "keep")["status"]["ready"] is True
    emu.admin("faults", {"faults": [{"workflow": "keep", "state": "Setup", "status": "Error", "message": "boom"}]})
    patch(api, "keep", {"spec": {"desiredState": "Setup"}})
    wait_for(lambda: get(api, "workflows", "keep").get("status", {}).get("status") == "Error")
    assert get(api, "workflows", "keep")["status"]["message"] == "DW Directive 0: boom"
    emu.admin("faults", {"faults": [{"state": "Proposal", "status": "TransientCondition", "message": "slow",
                                     "duration": 0.5}]})
    api.create_namespaced_custom_object(GROUP, VERSION, "default", "workflows", workflow("tc", []))
    wait_for(lambda: get(api, "workflows", "tc").get("status", {}).get("status") == "TransientCondition")
    ready_in(api, "tc", "Proposal")
    emu.admin("rabbits/rabbit1", {"status": "Offline"})
    assert get(api, "storages", "rabbit1")["status"]["status"] == "Offline"
    emu.stop()


def test_a_whole_workflow_with_copy_out(tmp_path, emu):
    """The emulator through all seven states with a WLM written here in Python: Servers and
    Computes filled from the breakdown, the mounts acknowledged as a compute's mount daemon
    would, a file written into the job's storage copied out in DataOut."""
    api = api_of(emu)
    out = tmp_path / "results"
    directives = ["#DW jobdw type=xfs capacity=1GiB name=my-storage",
                  f"#DW copy_out source=$DW_JOB_my_storage/data destination={out}"]
    api.create_namespaced_custom_object(GROUP, VERSION, "default", "workflows",
                                        workflow("full", directives, uid=os.getuid()))
    ready_in(api, "full", "Proposal")
    dbd = get(api, "directivebreakdowns", "full-0")
    size = dbd["status"]["storage"]["allocationSets"][0]["minimumCapacity"]
    patch(api, "full-0", {"spec": {"allocationSets": [
        {"label": "xfs", "allocationSize": size, "storage": [{"name": "rabbit0", "allocationCount": 2}]}]}},
        plural="servers")
    patch(api, "full", {"data": [{"name": "node0"}, {"name": "node1"}]}, plural="computes")
    for state in ("Setup", "DataIn"):
        patch(api, "full", {"spec": {"desiredState": state}})
        ready_in(api, "full", state)
    patch(api, "full", {"spec": {"desiredState": "PreRun"}})
    mounts = wait_for(lambda: [m for m in api.list_cluster_custom_object(GROUP, VERSION, "clientmounts")["items"]]
                      if len(api.list_cluster_custom_object(GROUP, VERSION, "clientmounts")["items"]) == 2 else None)
    for m in mounts:
        assert m["spec"]["desiredState"] == "mounted" and m["metadata"]["namespace"] in ("node0", "node1")
        api.patch_namespaced_custom_object_status(GROUP, VERSION, m["metadata"]["namespace"], "clientmounts",
                                                  m["metadata"]["name"], {"status": {
                                                      "allReady": True, "mounts": [{"state": "mounted", "ready": True}]}})
    ready_in(api, "full", "PreRun")
    env = get(api, "workflows", "full")["status"]["env"]
    path = env["DW_JOB_my_storage"]
    assert env["DW_JOB_XFS"] == path and env["DW_JOBS"] == f"my-storage:{path}"
    assert env["DW_WORKFLOW_NAME"] == "full"
    os.makedirs(os.path.join(path, "data"))
    with open(os.path.join(path, "data", "result.txt"), "w") as f:
        f.write("42\n")
    patch(api, "full", {"spec": {"desiredState": "PostRun"}})
    wait_for(lambda: all(m["spec"]["desiredState"] == "unmounted"
                         for m in api.list_cluster_custom_object(GROUP, VERSION, "clientmounts")["items"]))
    for m in api.list_cluster_custom_object(GROUP, VERSION, "clientmounts")["items"]:
        api.patch_namespaced_custom_object_status(GROUP, VERSION, m["metadata"]["namespace"], "clientmounts",
                                                  m["metadata"]["name"], {"status": {
                                                      "allReady": True, "mounts": [{"state": "unmounted", "ready": True}]}})
    ready_in(api, "full", "PostRun")
    patch(api, "full", {"spec": {"desiredState": "DataOut"}})
    ready_in(api, "full", "DataOut")
    assert (out / "result.txt").read_text() == "42\n"
    patch(api, "full", {"spec": {"desiredState": "Teardown"}})
    ready_in(api, "full", "Teardown")
    assert not os.path.exists(path)
    assert api.list_cluster_custom_object(GROUP, VERSION, "clientmounts")["items"] == []
    api.delete_namespaced_custom_object(GROUP, VERSION, "default", "workflows", "full")
    wait_for(lambda: not api.list_namespaced_custom_object(GROUP, VERSION, "default", "workflows")["items"])
    shutil.rmtree(out)
