//! Mirrors: their runtime built from a stored definition, create / update / delete, and the
//! operation and audit records those calls write.

use super::*;

impl Coordinator {
    /// Builds a mirror's runtime. Its data paths start per slot when partitions are assigned
    /// (`slots`).
    pub(super) fn add_mirror(&mut self, stored: StoredMirror) {
        let name = stored.spec.name.clone();
        let mut source_client_error = None;
        let source_admin = match self.connect_mirror_source(&stored.spec.source) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(mirror = %name, "cannot create source client: {e}");
                // A broken client config: keep the mirror visible, with the reason on every call.
                source_client_error = Some(e.to_string());
                Arc::new(UnusableAdmin::new(&e))
            }
        };
        let topic_ids = Arc::new(RwLock::new(HashMap::new()));
        let new_lineage = Arc::new(RwLock::new(HashSet::new()));
        let throttle = Arc::new(crate::domain::throttle::Throttle::new(
            stored.spec.replication_throttle_bytes_per_sec,
            std::time::Instant::now(),
        ));
        let m = MirrorRt {
            throttle,
            stored,
            source_admin,
            pipes: BTreeMap::new(),
            data_path: DataPathStatus::Starting,
            fenced: false,
            observed_cluster_id: None,
            cluster_id_status: ClusterIdStatus::Unknown,
            cluster_id_checked_at: None,
            cluster_id_error: None,
            topics: BTreeMap::new(),
            topic_ids,
            new_lineage,
            last_mirror_epochs: crate::store::LastMirrorEpochsValue { topics: Vec::new() },
            sync: SyncKind::ALL.iter().map(|k| SyncStatus::new(*k)).collect(),
            applied_configs: HashMap::new(),
            group_views: Vec::new(),
            metadata_in_flight: false,
            metadata_again: false,
            lag_in_flight: false,
            lag_due: tokio::time::Instant::now(),
            prune_in_flight: false,
            restart_pipe_at: BTreeMap::new(),
            pipe_restarts: 0,
            failbacks: BTreeMap::new(),
            failback_watch_in_flight: false,
            secret_error: None,
            source_client_error,
            discovery: discovery::DiscoveryRt::default(),
        };
        self.mirrors.insert(name.clone(), m);
        self.check_secrets_open(&name);
    }

    /// A mirror's source admin client, from its stored connection settings.
    pub(super) fn connect_mirror_source(&self, source: &SourceSpec) -> crate::kafka::KafkaResult<Admin> {
        self.ports.connect_source(
            &source.bootstrap_servers,
            &source.properties,
            self.config.request_timeout.min(Duration::from_secs(10)),
        )
    }

    /// Marks `mirror`'s data path failed when a secret of its definition is still sealed (this
    /// instance has no key that opens it), or clears that mark once it opens. Only that mirror
    /// stops; every other mirror runs on.
    pub(super) fn check_secrets_open(&mut self, mirror: &str) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let error = self.config.sealer.unseal_properties(mirror, &m.stored.spec.source.properties).1;
        match (&error, &m.secret_error) {
            (Some(e), _) => {
                tracing::error!(%mirror, "cannot decrypt the mirror's stored secret: {e}");
                m.data_path = DataPathStatus::Failed { message: e.to_string() };
            }
            (None, Some(_)) => m.data_path = DataPathStatus::Starting,
            (None, None) => {}
        }
        m.secret_error = error.map(|e| e.to_string());
    }

    /// Fences the transactional ids of the single-pipe-per-mirror layout for `mirrors` (see
    /// `slots::legacy_transactional_ids`), all at once. Best effort: a failure only means an open
    /// transaction of that layout, if any, ends by its own timeout.
    ///
    /// At most [`LEGACY_FENCES_AT_ONCE`] at a time: each is a librdkafka producer with its own
    /// threads, and a thousand mirrors must not start two thousand of them together.
    ///
    /// At once because it runs at every start-up before the instance joins the slot group, two
    /// ids per mirror, each a new producer and its InitProducerId round trip: one after another,
    /// a restart with 20 mirrors took 9.2–13.7 s from engine start to the join on the benchmark
    /// box — past the 10 s session timeout, so a rolling restart would have moved its slots —
    /// and 1.8–2.2 s with up to 32 at once (`bench/restart-mirrors.sh`, session 23).
    pub(super) async fn fence_legacy<'m>(&self, mirrors: impl IntoIterator<Item = &'m str>) {
        let ids: Vec<(&str, String)> = mirrors
            .into_iter()
            .flat_map(|m| slots::legacy_transactional_ids(&self.config, m).into_iter().map(move |id| (m, id)))
            .collect();
        let fences = ids.iter().map(|(mirror, id)| async move {
            if let Err(e) = self.ports.fence_writer(&self.config, id).await {
                tracing::warn!(%mirror, transactional_id = %id, "cannot fence the earlier layout's writer: {e}");
            }
        });
        use futures_util::StreamExt;
        futures_util::stream::iter(fences).buffer_unordered(LEGACY_FENCES_AT_ONCE).collect::<Vec<()>>().await;
    }

    pub(super) async fn wait_ready(&self, ready: Vec<tokio::sync::oneshot::Receiver<()>>) {
        for rx in ready {
            let _ = tokio::time::timeout(self.config.request_timeout * 2, rx).await;
        }
    }

    /// The checks of a create that need no Kafka: run before the source is asked, and again when
    /// its answer is in (another create may have taken the name meanwhile).
    pub(super) fn check_create(&self, spec: &MirrorSpec) -> Result<(), EngineError> {
        self.check_writable()?;
        validate_mirror_name(&spec.name)?;
        if spec.source.bootstrap_servers.trim().is_empty() {
            return Err(EngineError::rejected(ProblemKind::InvalidName, "source.bootstrap_servers must not be empty"));
        }
        if self.mirrors.contains_key(&spec.name) || self.off_loop.is_creating(&spec.name) {
            return Err(EngineError::rejected(
                ProblemKind::MirrorExists,
                format!("mirror {:?} already exists", spec.name),
            ));
        }
        check_group_patterns(&spec.sync)?;
        check_topic_policy(&spec.topic_include, &spec.topic_exclude)?;
        self.check_plaintext_secrets(&spec.source.properties)?;
        check_throttle(spec.replication_throttle_bytes_per_sec)?;
        spec.approval.check().map_err(|e| EngineError::rejected(ProblemKind::InvalidSetting, e))
    }

    /// A secret given as a plaintext value is stored sealed when this deployment has a key for
    /// secrets at rest; without one it is refused (unless the deployment allows plaintext
    /// secrets), with how to configure a key or give a reference instead.
    pub(super) fn check_plaintext_secrets(&self, given: &BTreeMap<String, String>) -> Result<(), EngineError> {
        match crate::domain::secrets::first_plaintext_secret(given) {
            Some(name) if !self.config.sealer.accepts_plaintext() => Err(EngineError::rejected(
                ProblemKind::InvalidProperty,
                format!(
                    "property {name:?} is a secret given in plaintext, and this kmirror has no key to store it \
                     encrypted: configure one ([secrets] key_file or KMIRROR_SECRETS_KEY_FILE; `kmirror secrets \
                     generate-key` writes one), or give the value as a reference (${{file:/path}} or ${{env:NAME}}), \
                     or allow plaintext secrets at rest ([secrets] allow_plaintext = true)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Creates a mirror whose source answered with `cluster` (asked off the loop: see
    /// `off_loop::create_probe`).
    pub(super) async fn create_mirror(
        &mut self,
        mut spec: MirrorSpec,
        cluster: crate::kafka::ClusterDescription,
        actor: &Actor,
    ) -> Result<(), EngineError> {
        self.check_create(&spec)?;
        match &spec.expected_source_cluster_id {
            Some(expected) if *expected != cluster.cluster_id => {
                return Err(EngineError::rejected(
                    ProblemKind::SourceClusterIdMismatch,
                    format!("the source cluster ID is {} but {expected} was expected", cluster.cluster_id),
                ));
            }
            Some(_) => {}
            None => spec.expected_source_cluster_id = Some(cluster.cluster_id.clone()),
        }
        if cluster.cluster_id == self.destination_cluster_id {
            return Err(EngineError::rejected(
                ProblemKind::InvalidName,
                "the source is the destination cluster itself (a mirror loop)",
            ));
        }
        let stored = StoredMirror { spec, created_at: now(), updated_at: now(), created_acls: Vec::new() };
        self.writes.push(persist::mirror(&stored, self.state_partitions, &self.config.sealer));
        self.flush().await?;
        let name = stored.spec.name.clone();
        self.add_mirror(stored);
        if let Some(m) = self.mirrors.get_mut(&name) {
            m.observed_cluster_id = Some(cluster.cluster_id);
            m.cluster_id_status = ClusterIdStatus::Ok;
            m.cluster_id_checked_at = Some(now());
        }
        tracing::info!(mirror = %name, actor = %actor.identity, "mirror created");
        Ok(())
    }

    pub(super) async fn update_mirror(
        &mut self,
        name: &str,
        update: MirrorUpdate,
        actor: &Actor,
    ) -> Result<(), EngineError> {
        self.check_writable()?;
        let m = self.mirrors.get(name).ok_or_else(|| EngineError::mirror_not_found(name))?;
        let mut stored = m.stored.clone();
        if let Some(source) = &update.source {
            // The same checks as a create (the client properties were checked by the handle).
            if source.bootstrap_servers.trim().is_empty() {
                return Err(EngineError::rejected(
                    ProblemKind::InvalidName,
                    "source.bootstrap_servers must not be empty",
                ));
            }
            self.check_plaintext_secrets(&source.properties)?;
        }
        if let Some(mut source) = update.source {
            // Secrets are write-only: a redacted value sent back means "keep the stored one".
            for (k, v) in source.properties.iter_mut() {
                if v == crate::domain::secrets::REDACTED
                    && let Some(old) = stored.spec.source.properties.get(k)
                {
                    *v = old.clone();
                }
            }
            stored.spec.source = source;
        }
        if let Some(id) = update.expected_source_cluster_id {
            stored.spec.expected_source_cluster_id = Some(id);
        }
        if let Some(sync) = update.sync {
            check_group_patterns(&sync)?;
            stored.spec.sync = sync;
        }
        if let Some(rate) = update.replication_throttle_bytes_per_sec {
            check_throttle(Some(rate))?;
            stored.spec.replication_throttle_bytes_per_sec = Some(rate).filter(|r| *r > 0);
        }
        if let Some(include) = update.topic_include {
            stored.spec.topic_include = include;
        }
        if let Some(exclude) = update.topic_exclude {
            stored.spec.topic_exclude = exclude;
        }
        check_topic_policy(&stored.spec.topic_include, &stored.spec.topic_exclude)?;
        let policy_changed = (&stored.spec.topic_include, &stored.spec.topic_exclude)
            != (&m.stored.spec.topic_include, &m.stored.spec.topic_exclude);
        if let Some(approval) = update.approval {
            approval.check().map_err(|e| EngineError::rejected(ProblemKind::InvalidSetting, e))?;
            stored.spec.approval = approval;
        }
        // Only a real change restarts anything (a PUT that sends the same source, or `[redacted]`
        // for an unchanged secret, does not).
        let source_changed = stored.spec.source != m.stored.spec.source;
        stored.updated_at = now();
        self.writes.push(persist::mirror(&stored, self.state_partitions, &self.config.sealer));
        self.flush().await?;
        let m = self.mirrors.mirror_mut(name)?;
        m.stored = stored;
        m.throttle.set_rate(m.stored.spec.replication_throttle_bytes_per_sec, std::time::Instant::now());
        if policy_changed {
            // A new policy tries the topics the old one's starts refused (the preview did not
            // hold them back either); the refresh below runs discovery with it.
            m.discovery.retry_refused();
        }
        self.check_secrets_open(name);
        if source_changed {
            self.source_changed(name).await;
        }
        tracing::info!(mirror = %name, actor = %actor.identity, "mirror updated");
        self.spawn_metadata_refresh(Some(name));
        Ok(())
    }

    pub(super) async fn delete_mirror(&mut self, name: &str, actor: &Actor) -> Result<(), EngineError> {
        self.check_writable()?;
        let m = self.mirrors.get(name).ok_or_else(|| EngineError::mirror_not_found(name))?;
        let active: Vec<String> = m
            .topics
            .iter()
            .filter(|(_, t)| t.partitions.values().any(|p| p.record.state != PartitionState::Stopped))
            .map(|(n, _)| n.clone())
            .collect();
        if !active.is_empty() {
            return Err(EngineError::rejected(
                ProblemKind::MirrorHasActiveTopics,
                format!(
                    "mirror {name:?} still has topics that are not STOPPED: {}; stop them first",
                    active.join(", ")
                ),
            ));
        }
        // Tombstones for the mirror, its topics and partitions (positions are kept: they are the
        // lineage a later failback reads).
        self.writes.push(persist::mirror_tombstone(name, self.state_partitions));
        for (tname, t) in &m.topics {
            self.writes.push(persist::topic_tombstone(name, tname, self.state_partitions));
            for p in t.partitions.keys() {
                self.writes.push(persist::partition_tombstone(name, &t.source_topic_id, *p, self.state_partitions));
            }
        }
        self.flush().await?;
        self.shut_down_pipes(name, None, false).await;
        self.mirrors.remove(name);
        self.lineage_reads.forget(name);
        self.config_reads.forget(name);
        tracing::info!(mirror = %name, actor = %actor.identity, "mirror deleted");
        Ok(())
    }

    pub(super) fn next_operation_id(&mut self) -> String {
        self.op_seq += 1;
        format!("op-{}-{}", now().as_millis(), self.op_seq)
    }

    /// Writes the audit record of an operation and keeps it for the audit views.
    pub(super) async fn record_operation(
        &mut self,
        id: &str,
        mirror: &str,
        kind: OperationKind,
        actor: &Actor,
        requested_at: Timestamp,
        results: Vec<TopicOutcome>,
    ) {
        // A call about thousands of topics: its record keeps what fits (failures first).
        let (results, results_omitted) = persist::bound_results(results);
        let op = OperationView {
            id: id.to_string(),
            mirror: mirror.to_string(),
            kind,
            topics: results.iter().map(|r| r.topic.clone()).collect(),
            results_omitted,
            requested_by: actor.identity.clone(),
            client_address: actor.address.clone(),
            requested_at: requested_at.as_millis(),
            finished_at: Some(now().as_millis()),
            results,
            accepted_by: Some(self.config.instance_id.clone()),
        };
        self.writes.push(persist::operation(&op, self.state_partitions));
        if let Err(e) = self.flush().await {
            tracing::warn!(%mirror, "cannot record operation {id}: {e}");
        } else if self.group.is_some() {
            self.own_writes.push(op.clone(), None);
        }
        let mut ops = self.operations.write().unwrap_or_else(|e| e.into_inner());
        ops.push_back(op);
        while ops.len() > persist::MAX_OPERATIONS {
            ops.pop_front();
        }
    }

    /// Records a mirror-level change (create, update, delete) in the audit trail.
    pub(super) async fn record_mirror_change(
        &mut self,
        mirror: &str,
        kind: OperationKind,
        actor: &Actor,
        result: &Result<(), EngineError>,
    ) {
        if matches!(result, Err(EngineError::Rejected { kind: ProblemKind::Fenced, .. })) {
            return; // a fenced instance must not write
        }
        let id = self.next_operation_id();
        let outcome = TopicOutcome {
            topic: String::new(),
            ok: result.is_ok(),
            error: result.as_ref().err().map(|e| Problem { kind: e.kind(), detail: e.to_string() }),
        };
        self.record_operation(&id, mirror, kind, actor, now(), vec![outcome]).await;
    }
}
