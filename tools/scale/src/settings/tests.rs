use super::*;

fn project_text() -> String {
    std::fs::read_to_string(project_template()).expect("template.yaml is readable")
}

fn project() -> Settings {
    Settings::read(&project_text(), &[]).expect("the project's template reads")
}

fn overridden(name: &str, value: &str) -> Result<Settings, TemplateError> {
    Settings::read(&project_text(), &[(name.to_owned(), value.to_owned())])
}

/// The one block of the template that starts at `marker`, with `from` replaced once in it.
fn edited(marker: &str, from: &str, to: &str) -> String {
    let text = project_text();
    let start = text.find(marker).expect("marker in template.yaml");
    let offset = text[start..].find(from).expect("value after the marker");
    let mut out = text;
    out.replace_range(start + offset..start + offset + from.len(), to);
    out
}

#[test]
fn the_lanes_run_the_production_columns_batches_at_once_and_the_trial_columns_when_asked() {
    let settings = project();
    let (_, slow) = settings
        .source_of(&settings.refresh.slow_queue)
        .expect("slow lane read");
    let (_, fast) = settings
        .source_of(&settings.refresh.fast_queue)
        .expect("fast lane read");
    assert_eq!(slow.maximum_concurrency, Some(30));
    assert_eq!(fast.maximum_concurrency, Some(200));
    assert_eq!((slow.batch_size, fast.batch_size), (10, 10));
    assert!(fast.report_batch_item_failures);
    let trial = Settings::read_project(&[("Concurrency".to_owned(), "trial".to_owned())])
        .expect("template");
    let (_, slow) = trial
        .source_of(&trial.refresh.slow_queue)
        .expect("slow lane read");
    assert_eq!(slow.maximum_concurrency, Some(2));
}

#[test]
fn the_refresh_reads_the_budget_lanes_and_lease_the_parameters_default_to() {
    let refresh = project().refresh;
    assert_eq!(
        refresh.budget,
        BudgetLimits {
            per_minute: 9_000,
            per_hour: 135_000
        }
    );
    assert_eq!(refresh.lanes.switch, LaneSwitch::Auto);
    assert_eq!(refresh.lanes.quiet_after_ms, 259_200_000);
    assert_eq!(refresh.lanes.slow_interval_ms, 60_000);
    assert!(refresh.lanes.fast_tenants.is_empty());
    assert_eq!(refresh.lease_times.duration_ms, 8_000);
    assert_eq!(refresh.lease_times.call_ms, 3_500);
    assert_eq!(refresh.max_receives, 5);
    let delays: Vec<u64> = refresh
        .retry_queues
        .iter()
        .map(|(d, _)| d.seconds())
        .collect();
    assert_eq!(delays, [15, 60, 900]);
}

#[test]
fn a_parameter_given_on_the_command_line_replaces_its_default() {
    let settings = overridden("WeComBudgetPerMinute", "540").expect("540 is allowed");
    assert_eq!(settings.refresh.budget.per_minute, 540);
    assert_eq!(settings.admin.budget.per_minute, 540);
    assert!(settings.parameters["WeComBudgetPerMinute"].overridden);
}

#[test]
fn a_parameter_outside_its_bounds_or_unknown_is_refused_by_name() {
    let too_high = overridden("WeComBudgetPerMinute", "10001").unwrap_err();
    assert_eq!(too_high.at, "--parameter");
    assert!(
        too_high.problem.contains("WeComBudgetPerMinute=10001"),
        "{too_high}"
    );
    assert!(too_high.problem.contains("MaxValue"), "{too_high}");
    let not_allowed = overridden("SlowLaneSwitch", "sometimes").unwrap_err();
    assert!(
        not_allowed.problem.contains("AllowedValues"),
        "{not_allowed}"
    );
    let unknown = overridden("NoSuchKnob", "1").unwrap_err();
    assert!(unknown.problem.contains("NoSuchKnob"), "{unknown}");
}

#[test]
fn the_sweep_fires_at_the_rate_its_period_parameter_chooses_through_the_condition() {
    assert_eq!(project().sweep.rate, Duration::from_secs(300));
    let every_minute = overridden("SweepPeriodMinutes", "1").expect("1 is allowed");
    assert_eq!(every_minute.sweep.rate, Duration::from_secs(60));
    assert_eq!(every_minute.sweep.settings.period_ms, 60_000);
    assert_eq!(project().tick.rate, Duration::from_secs(60));
    assert_eq!(project().sweep.settings.reads_per_tenant_hour, 60);
}

#[test]
fn queues_read_as_fifo_or_standard_with_their_timeouts_delays_and_dead_letters() {
    let settings = project();
    let refresh = settings.queue(&settings.refresh.fast_queue);
    assert!(refresh.fifo && refresh.high_throughput && refresh.content_based_deduplication);
    assert_eq!(refresh.visibility_timeout, Duration::from_secs(60));
    let redrive = refresh.redrive.as_ref().expect("refresh.fifo dead-letters");
    assert_eq!(
        redrive.dead_letter_queue,
        settings.refresh.dead_letter_queue
    );
    assert_eq!(redrive.max_receive_count, 5);
    let fan_out = settings.queue(&settings.fan_out.queue);
    assert!(!fan_out.fifo);
    assert_eq!(fan_out.visibility_timeout, Duration::from_secs(180));
    let (_, longest_retry) = &settings.refresh.retry_queues[2];
    assert_eq!(
        settings.queue(longest_retry).delay,
        Duration::from_secs(900)
    );
    let (function, source) = settings
        .source_of(&settings.fan_out.queue)
        .expect("fan-out read");
    assert_eq!(
        (source.batch_size, source.maximum_concurrency),
        (5, Some(40))
    );
    assert_eq!(function.timeout, Duration::from_secs(30));
}

#[test]
fn functions_take_their_timeout_and_memory_from_themselves_or_the_globals() {
    let settings = project();
    let refresh = settings.function(&settings.refresh.function);
    assert_eq!(
        (refresh.timeout, refresh.memory_mb),
        (Duration::from_secs(10), 256)
    );
    assert_eq!(refresh.architecture, "x86_64");
    assert_eq!(refresh.reserved_concurrency, None);
    // Globals' variables merge with the function's own (SAM merges maps).
    assert_eq!(refresh.environment["QRSYNC_CLOCK_OFFSET_SECONDS"], "0");
    assert_eq!(refresh.environment["SLOW_LANE_SWITCH"], "auto");
    let sweep = settings.function(&settings.sweep.function);
    assert_eq!(sweep.timeout, Duration::from_secs(240));
    assert_eq!(settings.record_facts.inbox_max_receives, 5);
}

#[test]
fn the_bill_counts_the_templates_alarms_table_and_each_functions_log_retention() {
    let settings = project();
    let account = &settings.account;
    assert!(account.alarms >= 20, "{account:?}");
    assert_eq!(account.dashboards, 1);
    assert_eq!(
        account.log_groups_with_retention as usize,
        settings.functions.len(),
        "one log group with a retention per function"
    );
    assert_eq!(account.log_retention_days, Some(30));
    let kept = Settings::read_project(&[("LogRetentionDays".to_owned(), "7".to_owned())])
        .expect("template");
    assert_eq!(kept.account.log_retention_days, Some(7));
    assert_eq!(account.nat_gateways, 0, "FixedEgress is off by default");
    assert_eq!(account.interface_endpoint_zones, 0);
    for (addresses, nat_gateways) in [("1", 1), ("2", 2), ("4", 4)] {
        let egress = Settings::read_project(&[
            ("FixedEgress".to_owned(), "on".to_owned()),
            ("EgressAddresses".to_owned(), addresses.to_owned()),
        ])
        .expect("template");
        assert_eq!(egress.account.nat_gateways, nat_gateways, "{addresses}");
    }
    assert!(account.table_on_demand && account.point_in_time_recovery);
    // gsi1 (keys only: due items, marks, claims, each tenant's codes) and gsi2 (scheduled
    // staff, the schedule projected).
    assert_eq!(account.table_indexes, 2);
}

#[test]
fn a_value_changed_in_a_copy_of_the_template_changes_what_is_read() {
    let text = edited("    production: {", "SlowLane: 30", "SlowLane: 7");
    let settings = Settings::read(&text, &[]).expect("edited template reads");
    let (_, slow) = settings
        .source_of(&settings.refresh.slow_queue)
        .expect("slow lane read");
    assert_eq!(slow.maximum_concurrency, Some(7));
    let text = edited(
        "  RefreshQueue:\n",
        "VisibilityTimeout: 60",
        "VisibilityTimeout: 45",
    );
    let settings = Settings::read(&text, &[]).expect("edited template reads");
    assert_eq!(
        settings
            .queue(&settings.refresh.fast_queue)
            .visibility_timeout,
        Duration::from_secs(45)
    );
}

#[test]
fn a_setting_the_simulation_reads_removed_from_the_template_is_an_error_naming_it() {
    let text = edited(
        "  RefreshCodesFunction:",
        "          WECOM_BUDGET_PER_MINUTE: !Ref WeComBudgetPerMinute\n",
        "",
    );
    let error = Settings::read(&text, &[]).unwrap_err();
    assert!(error.at.contains("RefreshCodesFunction"), "{error}");
    assert!(error.at.contains("WECOM_BUDGET_PER_MINUTE"), "{error}");
}

#[test]
fn a_retry_queue_whose_delay_disagrees_with_the_domain_is_refused() {
    let text = edited(
        "  RefreshRetry60sQueue:",
        "DelaySeconds: 60",
        "DelaySeconds: 30",
    );
    let error = Settings::read(&text, &[]).unwrap_err();
    assert!(error.at.contains("RefreshRetry60sQueue"), "{error}");
}

#[test]
fn short_and_long_forms_of_the_intrinsic_functions_read_the_same() {
    let template = |body: &str| {
        format!(
            "Parameters:\n  Size: {{ Type: Number, Default: 3 }}\n  Name: {{ Type: String, Default: x }}\n\
             Conditions:\n  Big: !Not [!Equals [!Ref Size, 1]]\n  Small: {{ 'Fn::Equals': [{{ Ref: Size }}, 1] }}\n\
             Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n{body}"
        )
    };
    let short = template(
        "      A: !Ref Size\n      B: !If [Big, !Sub 'n-${Name}-${AWS::StackName}', no]\n      C: !GetAtt Q.Arn\n      D: !Ref AWS::NoValue\n",
    );
    let long = template(
        "      A: { Ref: Size }\n      B: { 'Fn::If': [Small, no, { 'Fn::Sub': 'n-${Name}-${AWS::StackName}' }] }\n      C: { 'Fn::GetAtt': [Q, Arn] }\n",
    );
    let read = |text: &str| {
        let template = Template::parse(text, &[]).expect("parses");
        template.resources[0].properties.clone()
    };
    let expected = Node::Map(vec![
        ("A".into(), Node::Int(3)),
        ("B".into(), Node::Text("n-x-${AWS::StackName}".into())),
        (
            "C".into(),
            Node::Attribute {
                resource: "Q".into(),
                attribute: "Arn".into(),
            },
        ),
    ]);
    assert_eq!(read(&short), expected);
    assert_eq!(read(&long), expected);
}

#[test]
fn a_rate_expression_reads_as_its_period_and_a_cron_is_refused() {
    assert_eq!(rate("rate(1 minute)"), Ok(Duration::from_secs(60)));
    assert_eq!(rate("rate(2 hours)"), Ok(Duration::from_secs(7_200)));
    assert!(rate("cron(0 9 * * ? *)").is_err());
}

#[test]
fn the_callback_path_reads_its_cache_and_the_stages_throttles() {
    let settings = project();
    assert_eq!(settings.callback.tenant_cache, Duration::from_secs(60));
    assert_eq!(
        settings.callback.inbox_queue,
        settings.record_facts.inbox_queue
    );
    let every_route = &settings.api_throttles[0];
    assert_eq!(
        (
            every_route.resource_path.as_str(),
            every_route.rate_per_second,
            every_route.burst
        ),
        ("/*", 1_000, 2_000)
    );
    let route = |settings: &Settings, path: &str, method: &str| {
        settings
            .api_throttles
            .iter()
            .find(|t| t.resource_path == path && t.http_method == method)
            .map(|t| (t.rate_per_second, t.burst))
    };
    let landing = "/~1l~1{tenant}~1{code}";
    assert_eq!(route(&settings, landing, "GET"), Some((500, 1_000)));
    let callback = "/~1wecom~1{tenant}~1callback";
    assert_eq!(route(&settings, callback, "POST"), Some((1_000, 2_000)));
    assert_eq!(route(&settings, callback, "GET"), Some((1_000, 2_000)));
    let lowered = overridden("LandingThrottleRatePerSecond", "50").expect("50 is allowed");
    assert_eq!(route(&lowered, landing, "GET"), Some((50, 1_000)));
}

#[test]
fn a_tick_timeout_not_shorter_than_its_cursor_lease_is_refused() {
    let text = edited("  ScheduleTickFunction:", "Timeout: 120", "Timeout: 180");
    let error = Settings::read(&text, &[]).unwrap_err();
    assert!(error.at.contains("ScheduleTickFunction"), "{error}");
    assert!(error.problem.contains("lease"), "{error}");
}

/// The functions whose environment names WeCom's API (the relays and the functions that call
/// WeCom through them or not), each with its `CodeUri` and `VpcConfig` (if any).
fn wecom_callers(overrides: &[(&str, &str)]) -> Vec<(String, String, Option<Node>)> {
    let overrides: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let template = Template::parse(&project_text(), &overrides).expect("template");
    template
        .resources
        .iter()
        .filter(|r| r.kind == "AWS::Serverless::Function")
        .filter(|r| {
            r.properties
                .get("Environment")
                .and_then(|e| e.get("Variables"))
                .and_then(|v| v.get("WECOM_API_BASE_URL"))
                .is_some()
        })
        .map(|r| {
            let code = match r.properties.get("CodeUri") {
                Some(Node::Text(uri)) => uri.clone(),
                other => panic!("{}: CodeUri {other:?}", r.id),
            };
            (r.id.clone(), code, r.properties.get("VpcConfig").cloned())
        })
        .collect()
}

#[test]
fn with_fixed_egress_only_the_relays_run_in_the_egress_subnets_each_in_its_own_addresss() {
    let relay_code = "./functions/wecom-relay";
    let off = wecom_callers(&[]);
    assert!(
        off.len() >= 3 && off.iter().all(|(_, code, _)| code != relay_code),
        "refresh, admin and sweep call WeCom, no relay: {off:?}"
    );
    assert!(off.iter().all(|(_, _, vpc)| vpc.is_none()), "{off:?}");
    let relayed = wecom_callers(&[("WeComRelay", "on")]);
    let relays: Vec<_> = relayed
        .iter()
        .filter(|(_, code, _)| code == relay_code)
        .collect();
    assert_eq!(relays.len(), 1, "one relay, outside any VPC: {relays:?}");
    assert!(relays[0].2.is_none());
    for (addresses, count) in [("1", 1), ("2", 2), ("3", 3), ("4", 4)] {
        let on = wecom_callers(&[("FixedEgress", "on"), ("EgressAddresses", addresses)]);
        let mut relays = 0;
        for (id, code, vpc) in &on {
            if code != relay_code {
                assert!(vpc.is_none(), "{id} calls through a relay, outside the VPC");
                continue;
            }
            relays += 1;
            let k: usize = id
                .trim_start_matches("WeComRelay")
                .trim_end_matches("Function")
                .parse()
                .unwrap_or_else(|_| panic!("{id} is not WeComRelay<k>Function"));
            let vpc = vpc
                .as_ref()
                .unwrap_or_else(|| panic!("{id} has no VpcConfig"));
            let Some(Node::List(ids)) = vpc.get("SubnetIds") else {
                panic!("{id}: {vpc:?}");
            };
            // Subnet k routes through NAT k; with one address zone b's subnet does too.
            let mut expected = vec![Node::Resource(format!("EgressPrivateSubnet{k}"))];
            if count == 1 {
                expected.push(Node::Resource("EgressPrivateSubnet2".to_owned()));
            }
            assert_eq!(ids, &expected, "{id} with {addresses} addresses");
        }
        assert_eq!(relays, count, "one relay per address");
    }
}

#[test]
fn the_public_routes_reserve_their_own_concurrency_and_the_consumers_fit_in_what_is_left() {
    use crate::services::lambda::{ACCOUNT_CONCURRENCY, MINIMUM_UNRESERVED};
    let settings = project();
    let reserved_by = |id: &str| settings.function(id).reserved_concurrency;
    assert_eq!(reserved_by(&settings.callback.function), Some(100));
    assert_eq!(reserved_by("LandingPageFunction"), Some(50));
    let reserved: u32 = settings
        .functions
        .values()
        .filter_map(|f| f.reserved_concurrency)
        .sum();
    // Every queue consumer at its MaximumConcurrency at once still leaves the unreserved pool
    // Lambda keeps, so the consumers never take the public routes' share or each other's.
    let consumers: u32 = settings
        .functions
        .values()
        .filter(|f| f.reserved_concurrency.is_none())
        .flat_map(|f| &f.queue_sources)
        .map(|source| {
            source
                .maximum_concurrency
                .expect("every consumer is bounded")
        })
        .sum();
    println!("reserved {reserved}, queue consumers at most {consumers}");
    assert!(
        reserved + consumers + MINIMUM_UNRESERVED <= ACCOUNT_CONCURRENCY,
        "reserved {reserved} + consumers {consumers} + {MINIMUM_UNRESERVED} > {ACCOUNT_CONCURRENCY}"
    );
    let none = Settings::read_project(&[
        ("CallbackReservedConcurrency".to_owned(), "0".to_owned()),
        ("LandingReservedConcurrency".to_owned(), "0".to_owned()),
    ])
    .expect("template");
    assert_eq!(
        none.function(&none.callback.function).reserved_concurrency,
        None
    );
}

#[test]
fn the_template_reads_with_every_option_of_a_real_account_on() {
    let settings = Settings::read_project(&[
        ("FixedEgress".to_owned(), "on".to_owned()),
        ("EgressAddresses".to_owned(), "4".to_owned()),
        ("PublicDomainName".to_owned(), "qr.example.com".to_owned()),
        (
            "PublicDomainCertificateArn".to_owned(),
            "arn:aws:acm:us-east-1:123456789012:certificate/x".to_owned(),
        ),
        ("PublicDomainHostedZoneId".to_owned(), "Z123".to_owned()),
    ])
    .expect("the template reads with its options on");
    assert_eq!(settings.account.nat_gateways, 4);
    assert_eq!(
        settings.account.interface_endpoint_zones, 0,
        "the relays call WeCom only: no endpoint to keep AWS traffic off the gateways"
    );
    assert_eq!(
        settings.account.egress_relays,
        (1..=4)
            .map(|k| format!("WeComRelay{k}Function"))
            .collect::<Vec<_>>()
    );
}
