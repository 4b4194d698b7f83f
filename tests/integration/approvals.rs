//! Two-person approval on the rig: a failover asked by one identity waits (nothing stops), the
//! same identity can never approve it, a second one approves and it runs, and the audit trail
//! shows the request, the approval and the call; rejection and expiry run nothing; an admin's
//! break-glass call runs at once and is marked; a delete waits the same way. Across a restart
//! and another instance: a pending request survives and is approved through the other
//! instance (real `kmirror serve` processes sharing the state topic).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use kmirror::auth::{Role, TokenEntry, TokenStore};

use crate::api::TestServer;
use crate::engine::{TestEngine, keyed};
use crate::support::*;

const ALICE: &str = "alice-operator-token-0123456789abcdef";
const BOB: &str = "bob-operator-token-00123456789abcdef";
const ROOT: &str = "root-admin-token-0000123456789abcdef";
const EVE: &str = "eve-viewer-token-00000123456789abcdef";

fn people() -> TokenStore {
    let e = |name: &str, token: &str, role| TokenEntry { name: name.into(), token: token.into(), role };
    TokenStore::new(vec![
        e("alice", ALICE, Role::Operator),
        e("bob", BOB, Role::Operator),
        e("root", ROOT, Role::Admin),
        e("eve", EVE, Role::Viewer),
    ])
}

async fn state_of(srv: &TestServer, mp: &str, topic: &str) -> String {
    srv.get(&format!("{mp}/topics/{topic}"), Some(EVE)).await.ok(200)["state"].as_str().unwrap().to_string()
}

async fn wait_state(srv: &TestServer, mp: &str, topic: &str, state: &str) {
    eventually(&format!("{topic} {state}"), Duration::from_secs(60), || async {
        (state_of(srv, mp, topic).await == state).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_needs_a_second_person() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "approve", 2, &[]).await;
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(100, 2, "a"))).await.unwrap();
    let eng = TestEngine::start().await;
    let srv = TestServer::start(eng.handle.clone(), people()).await;
    let mirror = unique("approve");
    let mp = format!("/api/v1/mirrors/{mirror}");
    let policy = json!({"required_for": ["stop", "delete"], "expires_after_seconds": 900});
    let body =
        json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}, "approval": policy});
    let created = srv.post("/api/v1/mirrors", ROOT, body).await.ok(201).clone();
    assert_eq!(created["approval"], policy);
    // Bad policies are refused.
    let bad =
        json!({"name": unique("x"), "source": {"bootstrap_servers": "a:1"}, "approval": {"required_for": ["reboot"]}});
    srv.post("/api/v1/mirrors", ROOT, bad).await.problem(400, "invalid-body");
    let short = json!({"approval": {"required_for": ["stop"], "expires_after_seconds": 1}});
    srv.call(Method::PATCH, &mp, Some(ROOT), short).await.problem(400, "invalid-setting");

    srv.post(&format!("{mp}/topics:start"), ALICE, json!({"topics": [topic.name]})).await.ok(200);
    wait_state(&srv, &mp, &topic.name, "MIRRORING").await;
    let stop = format!("{mp}/topics:stop");

    // Before sending: validate_only says the call needs approval.
    let v = srv.post(&stop, ALICE, json!({"topics": [topic.name], "validate_only": true})).await.ok(200).clone();
    assert_eq!(v["approval_required"], true, "{v}");
    // Without a reason: refused, nothing recorded.
    srv.post(&stop, ALICE, json!({"topics": [topic.name]})).await.problem(422, "reason-required");

    // Requested by alice: pending, nothing stopped.
    let r = srv.post(&stop, ALICE, json!({"topics": [topic.name], "reason": "planned DR test, ticket 42"})).await;
    let pending = r.ok(202).clone();
    assert_eq!(pending["status"], "pending_approval");
    let id = pending["operation_id"].as_str().unwrap().to_string();
    assert_eq!(pending["approval"]["status"], "pending");
    assert_eq!(pending["approval"]["requested_by"], "alice");
    assert_eq!(pending["approval"]["reason"], "planned DR test, ticket 42");
    let op = srv.get(&format!("/api/v1/operations/{id}"), Some(EVE)).await.ok(200).clone();
    assert_eq!((op["kind"].as_str(), op["outcome"].as_str()), (Some("approval_request"), Some("pending")), "{op}");
    assert_eq!(op["approval"]["action"], "stop");
    let listed = srv.get(&format!("/api/v1/approvals?mirror={mirror}&status=pending"), Some(EVE)).await.ok(200).clone();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(state_of(&srv, &mp, &topic.name).await, "MIRRORING");

    // Never the same identity; never a viewer.
    let approve = format!("/api/v1/approvals/{id}/approve");
    srv.post(&approve, ALICE, json!({})).await.problem(403, "approval-same-identity");
    srv.post(&approve, EVE, json!({})).await.problem(403, "forbidden");
    srv.post("/api/v1/approvals/op-none/approve", BOB, json!({})).await.problem(404, "approval-not-found");
    assert_eq!(state_of(&srv, &mp, &topic.name).await, "MIRRORING");

    // Bob approves: it runs, as alice asked it.
    let done = srv.post(&approve, BOB, json!({"reason": "checked with the app team"})).await.ok(200).clone();
    assert_eq!(done["approval"]["status"], "executed", "{done}");
    assert_eq!(done["approval"]["decided_by"], "bob");
    assert_eq!(done["result"]["results"][0]["ok"], true, "{done}");
    let stop_op = done["approval"]["executed_operation_id"].as_str().unwrap().to_string();
    wait_state(&srv, &mp, &topic.name, "STOPPED").await;
    srv.post(&approve, BOB, json!({})).await.problem(409, "approval-not-pending");

    // The audit trail: the request, the approval, the failover.
    let audit = srv.get(&format!("/api/v1/audit?mirror={mirror}"), Some(EVE)).await.ok(200).clone();
    let items = audit["items"].as_array().unwrap();
    let request = items.iter().find(|o| o["id"] == id.as_str()).expect("the request");
    assert_eq!((request["kind"].as_str(), request["requested_by"].as_str()), (Some("approval_request"), Some("alice")));
    assert_eq!(request["approval"]["status"], "executed");
    let approval = items.iter().find(|o| o["kind"] == "approve").expect("the approval");
    assert_eq!(approval["requested_by"], "bob");
    assert_eq!(approval["approval"]["id"], id.as_str());
    let failover = items.iter().find(|o| o["id"] == stop_op.as_str()).expect("the failover");
    assert_eq!((failover["kind"].as_str(), failover["requested_by"].as_str()), (Some("stop"), Some("alice")));
    assert_eq!(failover["approval"]["decided_by"], "bob", "{failover}");

    // Rejection runs nothing (and needs a reason).
    srv.post(&format!("{mp}/topics:start"), ALICE, json!({"topics": [topic.name]})).await.ok(200);
    wait_state(&srv, &mp, &topic.name, "MIRRORING").await;
    let r = srv.post(&stop, ALICE, json!({"topics": [topic.name], "reason": "second try"})).await.ok(202).clone();
    let id2 = r["operation_id"].as_str().unwrap().to_string();
    let reject = format!("/api/v1/approvals/{id2}/reject");
    srv.post(&reject, BOB, json!({})).await.problem(422, "reason-required");
    srv.post(&reject, ALICE, json!({"reason": "no"})).await.problem(403, "approval-same-identity");
    let rejected = srv.post(&reject, BOB, json!({"reason": "not during the sale"})).await.ok(200).clone();
    assert_eq!(rejected["approval"]["status"], "rejected");
    srv.post(&format!("/api/v1/approvals/{id2}/approve"), BOB, json!({})).await.problem(409, "approval-not-pending");
    assert_eq!(state_of(&srv, &mp, &topic.name).await, "MIRRORING");
    let audit = srv.get(&format!("/api/v1/audit?mirror={mirror}"), Some(EVE)).await.ok(200).clone();
    assert!(audit["items"].as_array().unwrap().iter().any(|o| o["kind"] == "reject" && o["requested_by"] == "bob"));

    // Expiry runs nothing.
    let short = json!({"approval": {"required_for": ["stop", "delete"], "expires_after_seconds": 5}});
    srv.call(Method::PATCH, &mp, Some(ROOT), short).await.ok(200);
    let r = srv.post(&stop, ALICE, json!({"topics": [topic.name], "reason": "will expire"})).await.ok(202).clone();
    let id3 = r["operation_id"].as_str().unwrap().to_string();
    eventually("the request to expire", Duration::from_secs(30), || async {
        let a = srv.get(&format!("/api/v1/approvals/{id3}"), Some(EVE)).await.ok(200).clone();
        (a["status"] == "expired").then_some(())
    })
    .await;
    srv.post(&format!("/api/v1/approvals/{id3}/approve"), BOB, json!({})).await.problem(409, "approval-expired");
    assert_eq!(state_of(&srv, &mp, &topic.name).await, "MIRRORING");

    // Break-glass: admins only, with a reason; runs at once and is marked.
    srv.post(&stop, ALICE, json!({"topics": [topic.name], "break_glass": true, "reason": "x"}))
        .await
        .problem(403, "break-glass-not-allowed");
    srv.post(&stop, ROOT, json!({"topics": [topic.name], "break_glass": true})).await.problem(422, "reason-required");
    let bg = srv.post(&stop, ROOT, json!({"topics": [topic.name], "break_glass": true, "reason": "region down"})).await;
    let bg = bg.ok(200).clone();
    assert_eq!(bg["results"][0]["ok"], true, "{bg}");
    assert_eq!(bg["approval"]["status"], "break_glass", "{bg}");
    wait_state(&srv, &mp, &topic.name, "STOPPED").await;
    let audit = srv.get(&format!("/api/v1/audit?mirror={mirror}"), Some(EVE)).await.ok(200).clone();
    let entry =
        audit["items"].as_array().unwrap().iter().find(|o| o["kind"] == "break_glass").expect("break-glass entry");
    assert_eq!(
        (entry["requested_by"].as_str(), entry["approval"]["reason"].as_str()),
        (Some("root"), Some("region down"))
    );
    let metrics = srv.get("/metrics", Some(EVE)).await;
    assert!(metrics.text.contains(&format!("kmirror_break_glass_total{{mirror=\"{mirror}\",action=\"stop\"}} 1")));

    // A delete waits too; bob approves it.
    let r = srv.call(Method::DELETE, &format!("{mp}?reason=decommission"), Some(ROOT), json!(null)).await;
    let pending = r.ok(202).clone();
    let id4 = pending["operation_id"].as_str().unwrap().to_string();
    srv.get(&mp, Some(EVE)).await.ok(200);
    let done = srv.post(&format!("/api/v1/approvals/{id4}/approve"), BOB, json!({})).await.ok(200).clone();
    assert_eq!(done["approval"]["status"], "executed", "{done}");
    srv.get(&mp, Some(EVE)).await.problem(404, "mirror-not-found");
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

/// One `kmirror serve` child process with the test's identities.
struct Serve {
    port: u16,
    args: Vec<String>,
    log: std::path::PathBuf,
    child: Option<Child>,
}

impl Serve {
    fn new(cluster: &str, state_topic: &str, id: &str) -> Serve {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut args: Vec<String> = [
            "serve",
            "--destination-bootstrap",
            &Cluster::Destination.bootstrap(),
            "--state-topic",
            state_topic,
            "--state-partitions",
            "4",
            "--cluster-name",
            cluster,
            "--instance-id",
            id,
            "--session-timeout-ms",
            "6000",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (name, role, token) in [("alice", "operator", ALICE), ("bob", "operator", BOB), ("root", "admin", ROOT)] {
            args.extend(["--token".to_string(), format!("{name}:{role}:{token}")]);
        }
        let log = std::env::temp_dir().join(format!("{cluster}-{id}.log"));
        let mut s = Serve { port, args, log, child: None };
        s.start();
        s
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        self.child = Some(
            Command::new(env!("CARGO_BIN_EXE_kmirror"))
                .args(&self.args)
                .env("RUST_LOG", "info,rdkafka=warn")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn kmirror serve"),
        );
    }

    fn terminate(&mut self) {
        let mut c = self.child.take().unwrap();
        let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while c.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "kmirror did not exit within 60 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    async fn call(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> Option<(u16, Value)> {
        let mut r = reqwest::Client::new()
            .request(method, format!("http://127.0.0.1:{}/api/v1{path}", self.port))
            .bearer_auth(token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.json().await.unwrap_or(Value::Null)))
    }

    async fn get(&self, path: &str) -> Option<Value> {
        match self.call(Method::GET, path, ROOT, None).await {
            Some((200, v)) => Some(v),
            _ => None,
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_request_survives_a_restart_and_is_approved_through_another_instance() {
    let _rig = shared().await;
    // 12 partitions: some land in the slots of each of the two instances.
    let topic = TestTopic::create(Cluster::Source, "approve-x", 12, &[]).await;
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(120, 12, "x"))).await.unwrap();
    let cluster = unique("apx");
    let state_topic = format!("__mirror_state-{cluster}");
    let mut one = Serve::new(&cluster, &state_topic, "one");
    let two = Serve::new(&cluster, &state_topic, "two");
    for s in [&one, &two] {
        eventually("kmirror serve to answer", Duration::from_secs(90), || async { s.get("/mirrors").await }).await;
    }
    let mirror = unique("apx");
    let mp = format!("/mirrors/{mirror}");
    let body = json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()},
                      "approval": {"required_for": ["stop"]}});
    let (status, v) = one.call(Method::POST, "/mirrors", ROOT, Some(body)).await.unwrap();
    assert_eq!(status, 201, "{v}");
    let start = json!({"topics": [topic.name]});
    let (status, v) = one.call(Method::POST, &format!("{mp}/topics:start"), ALICE, Some(start)).await.unwrap();
    assert_eq!(status, 200, "{v}");
    let topic_path = format!("{mp}/topics/{}", topic.name);
    for s in [&one, &two] {
        eventually("MIRRORING on every instance", Duration::from_secs(90), || async {
            (s.get(&topic_path).await?["state"] == "MIRRORING").then_some(())
        })
        .await;
    }

    // Alice asks through instance one.
    let stop = json!({"topics": [topic.name], "reason": "planned switch to the DR site"});
    let (status, v) = one.call(Method::POST, &format!("{mp}/topics:stop"), ALICE, Some(stop)).await.unwrap();
    assert_eq!(status, 202, "{v}");
    let id = v["operation_id"].as_str().unwrap().to_string();

    // Instance one restarts; the request is still there, pending, on both.
    one.terminate();
    one.start();
    for s in [&one, &two] {
        eventually("the pending request on every instance", Duration::from_secs(90), || async {
            (s.get(&format!("/approvals/{id}")).await?["status"] == "pending").then_some(())
        })
        .await;
    }
    assert_eq!(two.get(&topic_path).await.unwrap()["state"], "MIRRORING");
    // The restarted instance has taken its slots back (a takeover passes its partitions through
    // a restore of their own; a command recorded in the middle of it is a race of its own).
    let parts = format!("{mp}/partitions?page_size=1000");
    eventually("instance one back with its slots, every partition mirroring", Duration::from_secs(90), || async {
        let me = one.get("/instances").await?;
        let mine = me["instances"].as_array()?.iter().find(|i| i["this"] == true)?.clone();
        let slots: Vec<i64> = mine["slots"].as_array()?.iter().filter_map(Value::as_i64).collect();
        let ps = one.get(&parts).await?;
        let owned_by_one = ps["items"].as_array()?.iter().filter(|p| p["owner"] == "one").count();
        let all_mirroring = ps["items"].as_array()?.iter().all(|p| p["state"] == "MIRRORING" && p["owner"].is_string());
        (!slots.is_empty() && owned_by_one > 0 && all_mirroring).then_some(())
    })
    .await;

    // Bob approves through instance two; not alice.
    let approve = format!("/approvals/{id}/approve");
    let (status, v) = two.call(Method::POST, &approve, ALICE, Some(json!({}))).await.unwrap();
    assert_eq!((status, v["type"].as_str()), (403, Some("approval-same-identity")), "{v}");
    let (status, v) = two.call(Method::POST, &approve, BOB, Some(json!({}))).await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["approval"]["status"], "executed", "{v}");
    for s in [&one, &two] {
        eventually("STOPPED on every instance", Duration::from_secs(90), || async {
            (s.get(&topic_path).await?["state"] == "STOPPED").then_some(())
        })
        .await;
        eventually("the executed request on every instance", Duration::from_secs(60), || async {
            (s.get(&format!("/approvals/{id}")).await?["status"] == "executed").then_some(())
        })
        .await;
    }
    drop(one);
    drop(two);
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
    let _ = Cluster::Destination.admin().delete_topic(&state_topic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_requests_and_who_may_decide() {
    use kmirror::auth::Identity;
    use kmirror::ui::{Viewer, pages, view::UiOp};
    let _rig = shared().await;
    let eng = TestEngine::start().await;
    let mirror = unique("approve-ui");
    eng.create_mirror(&mirror).await;
    let actor = |name: &str| kmirror::engine::Actor { identity: name.into(), address: None };
    let policy = kmirror::engine::ApprovalPolicy {
        required_for: [kmirror::engine::ApprovalAction::Stop, kmirror::engine::ApprovalAction::Drill].into(),
        expires_after_seconds: 600,
    };
    let update = kmirror::engine::MirrorUpdate { approval: Some(policy), ..Default::default() };
    eng.handle.update_mirror(&mirror, update, actor("root")).await.unwrap();
    let call = kmirror::engine::PendingCall { topics: vec!["orders".into()], ..Default::default() };
    let r = eng
        .handle
        .gate(
            &mirror,
            Some(kmirror::engine::ApprovalAction::Stop),
            call,
            &actor("alice"),
            false,
            Some("<b>planned</b>"),
            false,
        )
        .await
        .unwrap();
    let kmirror::engine::Gate::Pending(request) = r else { panic!("the call must wait for approval") };
    let snap = eventually("the request in the snapshot", Duration::from_secs(10), || async {
        let s = eng.handle.snapshot();
        (!s.approvals.is_empty()).then_some(s)
    })
    .await;
    let viewer = |name: &str, role| Viewer::new(&Identity { name: name.into(), role }, "csrf-x", false);
    let now = kmirror::clock::now();
    let bob = pages::mirror_safety(&snap, &mirror, &viewer("bob", Role::Operator), now).unwrap();
    assert!(bob.contains(&format!("data-request=\"{}\"", request.request_id)), "{bob}");
    assert!(bob.contains("data-approve") && bob.contains("data-reject"), "{bob}");
    assert!(bob.contains("&#60;b&#62;planned") && !bob.contains("<b>planned"), "the reason is escaped: {bob}");
    assert!(bob.contains("Needs a second person&#39;s approval: Fail over, DR drill"), "{bob}");
    assert!(bob.contains("Request a drill"), "drills need approval too: {bob}");
    let alice = pages::mirror_safety(&snap, &mirror, &viewer("alice", Role::Operator), now).unwrap();
    assert!(!alice.contains("data-approve") && alice.contains("your request"), "{alice}");
    let eve = pages::mirror_safety(&snap, &mirror, &viewer("eve", Role::Viewer), now).unwrap();
    assert!(!eve.contains("data-approve") && !eve.contains("data-run-drill"), "{eve}");
    // The failover dialog says it before the call is sent, and asks for a reason.
    let dialog = pages::confirm(
        &snap,
        &mirror,
        UiOp::Failover,
        &["orders".to_string()],
        &viewer("bob", Role::Operator),
        true,
        "/",
    )
    .unwrap();
    assert!(dialog.contains("data-approval-required") && dialog.contains("name=\"reason\" required"), "{dialog}");
    assert!(!dialog.contains("break_glass"), "only admins see break-glass: {dialog}");
    let admin = pages::confirm(
        &snap,
        &mirror,
        UiOp::Failover,
        &["orders".to_string()],
        &viewer("root", Role::Admin),
        true,
        "/",
    )
    .unwrap();
    assert!(admin.contains("name=\"break_glass\""), "{admin}");
    eng.stop().await;
}

/// `kmirror` as a client of the `kmirror serve` on `port`, with `token` (its exit code, stdout,
/// stderr).
fn cli(port: u16, token: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .env("KMIRROR_URL", format!("http://127.0.0.1:{port}"))
        .env("KMIRROR_TOKEN", token)
        .env_remove("KMIRROR_TOKEN_FILE")
        .output()
        .expect("run kmirror");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_says_when_a_call_needs_approval_and_runs_drills() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "approve-cli", 2, &[]).await;
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(60, 2, "c"))).await.unwrap();
    let cluster = unique("apcli");
    let state_topic = format!("__mirror_state-{cluster}");
    let serve = Serve::new(&cluster, &state_topic, "solo");
    eventually("kmirror serve to answer", Duration::from_secs(90), || async { serve.get("/mirrors").await }).await;
    let mirror = unique("apcli");
    let body = json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()},
                      "approval": {"required_for": ["stop"]}});
    let (status, v) = serve.call(Method::POST, "/mirrors", ROOT, Some(body)).await.unwrap();
    assert_eq!(status, 201, "{v}");

    // A drill, which this policy does not cover, runs at once; --wait prints its figures.
    let blocking = |args: Vec<String>, token: &'static str| {
        let port = serve.port;
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            cli(port, token, &refs)
        })
    };
    let strings = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let (code, out, err) = blocking(strings(&["drills", "run", "--mirror", &mirror, "--wait"]), ALICE).await.unwrap();
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("RTO (ms)") && out.contains("passed"), "{out}");
    let (code, out, err) = blocking(strings(&["drills", "list", "--mirror", &mirror]), ALICE).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    let id = out.lines().nth(1).and_then(|l| l.split_whitespace().next()).expect("a drill row").to_string();
    let (code, out, _) = blocking(strings(&["drills", "report", "--mirror", &mirror, &id]), ALICE).await.unwrap();
    assert_eq!(code, Some(0));
    assert!(out.starts_with(&format!("# DR drill {id}: PASS")), "{out}");

    // A failover: said before it is sent, refused without a reason, then a request.
    let (status, v) = serve
        .call(Method::POST, &format!("/mirrors/{mirror}/topics:start"), ALICE, Some(json!({"topics": [topic.name]})))
        .await
        .unwrap();
    assert_eq!(status, 200, "{v}");
    let topic_path = format!("/mirrors/{mirror}/topics/{}", topic.name);
    eventually("MIRRORING", Duration::from_secs(60), || async {
        (serve.get(&topic_path).await?["state"] == "MIRRORING").then_some(())
    })
    .await;
    let stop = strings(&["topics", "stop", "--mirror", &mirror, "--topics", &topic.name]);
    let (code, _, err) = blocking(stop.clone(), ALICE).await.unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs a second person's approval for stop") && err.contains("--reason"), "{err}");
    let mut with_reason = stop.clone();
    with_reason.extend(strings(&["--reason", "planned switch"]));
    let (code, out, err) = blocking(with_reason, ALICE).await.unwrap();
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("waits for a second person's approval"), "{out}");
    let request = out.split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(serve.get(&topic_path).await.unwrap()["state"], "MIRRORING");
    let (code, out, _) =
        blocking(strings(&["approvals", "list", "--mirror", &mirror, "--status", "pending"]), BOB).await.unwrap();
    assert_eq!(code, Some(0));
    assert!(out.contains(&request) && out.contains("planned switch"), "{out}");
    let (code, _, err) = blocking(strings(&["approvals", "approve", &request]), ALICE).await.unwrap();
    assert_eq!(code, Some(2), "the requester may not approve: {err}");
    assert!(err.contains("approval-same-identity") || err.contains("second person"), "{err}");
    let (code, out, err) = blocking(strings(&["approvals", "approve", &request]), BOB).await.unwrap();
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("executed") && out.contains("It ran as operation"), "{out}");
    eventually("STOPPED", Duration::from_secs(60), || async {
        (serve.get(&topic_path).await?["state"] == "STOPPED").then_some(())
    })
    .await;
    drop(serve);
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
    let _ = Cluster::Destination.admin().delete_topic(&state_topic).await;
}
