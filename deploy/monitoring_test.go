package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/metrics"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// The dashboard and the alert policies are checked against the Monitoring
// API's published schemas: every field name must be one of its message's
// (an unknown field is refused by the API, or silently dropped by
// Terraform's JSON normalisation), and every enum value one of its enum's.
// The field names are the REST reference's:
//
//   - Dashboard, MosaicLayout, Tile, Widget, XyChart, DataSet,
//     TimeSeriesQuery, TimeSeriesFilter, Aggregation, Axis, Text:
//     https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards#Dashboard
//     and the pages it links (…/Shared.Types/…);
//   - AlertPolicy, Condition, MetricThreshold, Aggregation, Documentation:
//     https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies#AlertPolicy
//     (Terraform's google_monitoring_alert_policy spells them in snake_case).

// schema maps a message to its fields and, for message-typed fields, the
// field's message ("" for scalars, lists of scalars and enums).
var schema = map[string]map[string]string{
	"Dashboard": {"name": "", "displayName": "", "etag": "", "gridLayout": "GridLayout", "mosaicLayout": "MosaicLayout",
		"rowLayout": "RowLayout", "columnLayout": "ColumnLayout", "dashboardFilters": "DashboardFilter", "labels": ""},
	"MosaicLayout": {"columns": "", "tiles": "Tile"},
	"Tile":         {"xPos": "", "yPos": "", "width": "", "height": "", "widget": "Widget"},
	"Widget": {"title": "", "xyChart": "XyChart", "scorecard": "Scorecard", "text": "Text", "blank": "", "alertChart": "",
		"timeSeriesTable": "", "collapsibleGroup": "", "logsPanel": "", "incidentList": "", "pieChart": "", "errorReportingPanel": "",
		"sectionHeader": "", "singleViewGroup": "", "id": "", "visibilityCondition": ""},
	"XyChart": {"dataSets": "DataSet", "timeshiftDuration": "", "thresholds": "", "xAxis": "Axis", "yAxis": "Axis", "y2Axis": "Axis", "chartOptions": ""},
	"DataSet": {"timeSeriesQuery": "TimeSeriesQuery", "plotType": "", "legendTemplate": "", "minAlignmentPeriod": "", "targetAxis": "",
		"breakdowns": "", "dimensions": "", "measures": "", "sort": ""},
	"TimeSeriesQuery": {"timeSeriesFilter": "TimeSeriesFilter", "timeSeriesFilterRatio": "", "timeSeriesQueryLanguage": "",
		"prometheusQuery": "", "opsAnalyticsQuery": "", "unitOverride": "", "outputFullDuration": ""},
	"TimeSeriesFilter": {"filter": "", "aggregation": "Aggregation", "secondaryAggregation": "Aggregation", "pickTimeSeriesFilter": "",
		"statisticalTimeSeriesFilter": ""},
	"Aggregation": {"alignmentPeriod": "", "perSeriesAligner": "", "crossSeriesReducer": "", "groupByFields": ""},
	"Axis":        {"label": "", "scale": ""},
	"Text":        {"content": "", "format": "", "style": ""},
	"Scorecard":   {"timeSeriesQuery": "TimeSeriesQuery", "gaugeView": "", "sparkChartView": "", "thresholds": "", "blankView": ""},

	"AlertPolicy": {"name": "", "displayName": "", "documentation": "Documentation", "userLabels": "", "conditions": "Condition",
		"combiner": "", "enabled": "", "validity": "", "notificationChannels": "", "creationRecord": "", "mutationRecord": "",
		"alertStrategy": "", "severity": ""},
	"Documentation": {"content": "", "mimeType": "", "subject": "", "links": ""},
	"Condition": {"name": "", "displayName": "", "conditionThreshold": "MetricThreshold", "conditionAbsent": "", "conditionMatchedLog": "",
		"conditionMonitoringQueryLanguage": "", "conditionPrometheusQueryLanguage": "", "conditionSql": ""},
	"MetricThreshold": {"filter": "", "aggregations": "Aggregation", "denominatorFilter": "", "denominatorAggregations": "Aggregation",
		"forecastOptions": "", "comparison": "", "thresholdValue": "", "duration": "", "trigger": "", "evaluationMissingData": ""},
}

// enums are the enum-typed fields' values (Aggregation.Aligner and
// .Reducer, XyChart.DataSet.PlotType, Axis.Scale, Text.Format,
// ComparisonType, ConditionCombinerType, AlertPolicy.Severity,
// EvaluationMissingData).
var enums = map[string][]string{
	"perSeriesAligner": {"ALIGN_NONE", "ALIGN_DELTA", "ALIGN_RATE", "ALIGN_INTERPOLATE", "ALIGN_NEXT_OLDER", "ALIGN_MIN", "ALIGN_MAX",
		"ALIGN_MEAN", "ALIGN_COUNT", "ALIGN_SUM", "ALIGN_STDDEV", "ALIGN_COUNT_TRUE", "ALIGN_COUNT_FALSE", "ALIGN_FRACTION_TRUE",
		"ALIGN_PERCENTILE_99", "ALIGN_PERCENTILE_95", "ALIGN_PERCENTILE_50", "ALIGN_PERCENTILE_05", "ALIGN_PERCENT_CHANGE"},
	"crossSeriesReducer": {"REDUCE_NONE", "REDUCE_MEAN", "REDUCE_MIN", "REDUCE_MAX", "REDUCE_SUM", "REDUCE_STDDEV", "REDUCE_COUNT",
		"REDUCE_COUNT_TRUE", "REDUCE_COUNT_FALSE", "REDUCE_FRACTION_TRUE", "REDUCE_PERCENTILE_99", "REDUCE_PERCENTILE_95",
		"REDUCE_PERCENTILE_50", "REDUCE_PERCENTILE_05"},
	"plotType":              {"LINE", "STACKED_AREA", "STACKED_BAR", "HEATMAP"},
	"scale":                 {"LINEAR", "LOG10"},
	"format":                {"MARKDOWN", "RAW"},
	"comparison":            {"COMPARISON_GT", "COMPARISON_GE", "COMPARISON_LT", "COMPARISON_LE", "COMPARISON_EQ", "COMPARISON_NE"},
	"combiner":              {"AND", "OR", "AND_WITH_MATCHING_RESOURCE"},
	"severity":              {"CRITICAL", "ERROR", "WARNING"},
	"evaluationMissingData": {"EVALUATION_MISSING_DATA_INACTIVE", "EVALUATION_MISSING_DATA_ACTIVE", "EVALUATION_MISSING_DATA_NO_OP"},
	"mimeType":              {"text/markdown"},
}

var durationRe = regexp.MustCompile(`^[0-9]+s$`)

// checkJSON walks v as message msg and returns every problem.
func checkJSON(msg, path string, v any) []string {
	var bad []string
	switch x := v.(type) {
	case []any:
		for i, e := range x {
			bad = append(bad, checkJSON(msg, fmt.Sprintf("%s[%d]", path, i), e)...)
		}
	case map[string]any:
		fields, ok := schema[msg]
		if !ok {
			return []string{fmt.Sprintf("%s: message %s is not in the test's schema", path, msg)}
		}
		for k, e := range x {
			sub, ok := fields[k]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s.%s: not a field of %s", path, k, msg))
			case sub != "":
				bad = append(bad, checkJSON(sub, path+"."+k, e)...)
			default:
				bad = append(bad, checkScalar(path+"."+k, k, e)...)
			}
		}
	}
	return bad
}

func checkScalar(path, field string, v any) []string {
	s, isStr := v.(string)
	if vals, ok := enums[field]; ok && (!isStr || !slices.Contains(vals, s)) {
		return []string{fmt.Sprintf("%s: %v is not a value of the enum (%s)", path, v, strings.Join(vals, ", "))}
	}
	if (field == "alignmentPeriod" || field == "duration") && (!isStr || !durationRe.MatchString(s)) {
		return []string{fmt.Sprintf("%s: %v is not a duration in seconds (\"60s\")", path, v)}
	}
	return nil
}

// userMetrics returns the log-based metric names a filter reads.
func userMetrics(filter string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`logging\.googleapis\.com/user/([A-Za-z0-9_]+)`).FindAllStringSubmatch(filter, -1) {
		out = append(out, m[1])
	}
	return out
}

func logMetricNames(t *testing.T, m *module) map[string]*instance {
	t.Helper()
	out := map[string]*instance{}
	for _, b := range m.blocksOf("google_logging_metric") {
		for _, in := range b.instances {
			name, ok := str(get(in.value, "name"))
			if !ok {
				t.Fatalf("%s: name not known", b.addr())
			}
			out[name] = in
		}
	}
	return out
}

// TestDashboardSchema: deploy/dashboard.json uses only the Dashboard
// message's fields and enum values, its tiles fit its columns, and every
// log-based metric it charts is defined in metrics.tf.
func TestDashboardSchema(t *testing.T) {
	m := loadModule(t)
	defined := logMetricNames(t, m)
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(bytes.ReplaceAll(raw, []byte("${prefix}"), []byte("flexslurm")), &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range checkJSON("Dashboard", "dashboard", d) {
		t.Error(p)
	}
	ml := d["mosaicLayout"].(map[string]any)
	cols := ml["columns"].(float64)
	charted := 0
	for i, tile := range ml["tiles"].([]any) {
		tl := tile.(map[string]any)
		if tl["xPos"].(float64)+tl["width"].(float64) > cols {
			t.Errorf("tile %d exceeds the layout's %g columns", i, cols)
		}
		w := tl["widget"].(map[string]any)
		xy, ok := w["xyChart"].(map[string]any)
		if !ok {
			continue
		}
		for _, ds := range xy["dataSets"].([]any) {
			f := ds.(map[string]any)["timeSeriesQuery"].(map[string]any)["timeSeriesFilter"].(map[string]any)["filter"].(string)
			for _, name := range userMetrics(f) {
				charted++
				if defined[name] == nil {
					t.Errorf("tile %q charts logging.googleapis.com/user/%s, which metrics.tf does not define", w["title"], name)
				}
			}
		}
	}
	// Every metric the issue asks for is on the dashboard.
	for _, name := range []string{"flexslurm_nodes", "flexslurm_queued_requests", "flexslurm_queued_request_age_seconds",
		"flexslurm_capacity_wait_seconds", "flexslurm_cluster_events", "flexslurm_breaker_open", "flexslurm_decision_latency_seconds",
		"flexslurm_static_shortfall"} {
		if !strings.Contains(string(raw), "logging.googleapis.com/user/"+name+`\"`) {
			t.Errorf("the dashboard does not chart %s", name)
		}
	}
	if !strings.Contains(string(raw), "pubsub.googleapis.com/subscription/num_undelivered_messages") {
		t.Error("the dashboard does not chart dead letters")
	}
	if charted == 0 {
		t.Fatal("no chart read")
	}
}

// hclToJSON renders a resource body as the API's JSON field names
// (snake_case to lowerCamelCase; repeated blocks as lists), leaving out
// Terraform's own arguments.
func hclToJSON(body *hclsyntax.Body, in *instance, path []any) map[string]any {
	out := map[string]any{}
	for name := range body.Attributes {
		if len(path) == 0 && (name == "project" || name == "depends_on" || name == "for_each") {
			continue
		}
		v := get(in.value, append(slices.Clone(path), name)...)
		var val any = "?"
		if s, ok := str(v); ok {
			val = s
		} else if ss := strs(v); ss != nil {
			val = ss
		} else if v != cty.NilVal && v.IsKnown() && !v.IsNull() && v.Type() == cty.Number {
			f, _ := v.AsBigFloat().Float64()
			val = f
		}
		out[camel(name)] = val
	}
	counts := map[string]int{}
	for _, b := range body.Blocks {
		i := counts[b.Type]
		counts[b.Type]++
		list, _ := out[camel(b.Type)].([]any)
		out[camel(b.Type)] = append(list, hclToJSON(b.Body, in, append(slices.Clone(path), b.Type, i)))
	}
	return out
}

func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// TestAlertPoliciesSchema: the two alert policies use only AlertPolicy's
// fields and enum values; the dead-letter one watches the subscriptions
// pubsub.tf names "<topic>-dead-letter", the static-minimum one a
// log-based metric metrics.tf defines.
func TestAlertPoliciesSchema(t *testing.T) {
	m := loadModule(t)
	defined := logMetricNames(t, m)
	policies := map[string]string{}
	for _, b := range m.blocksOf("google_monitoring_alert_policy") {
		in := b.instances[0]
		js := hclToJSON(b.body, in, nil)
		// Terraform nests single blocks as lists; the API's message has one
		// documentation and one conditionThreshold per condition.
		for _, k := range []string{"documentation"} {
			if l, ok := js[k].([]any); ok && len(l) == 1 {
				js[k] = l[0]
			}
		}
		for _, c := range js["conditions"].([]any) {
			cm := c.(map[string]any)
			if l, ok := cm["conditionThreshold"].([]any); ok && len(l) == 1 {
				cm["conditionThreshold"] = l[0]
			}
		}
		for _, p := range checkJSON("AlertPolicy", b.addr(), js) {
			t.Error(p)
		}
		f, _ := str(get(in.value, "conditions", 0, "condition_threshold", 0, "filter"))
		policies[b.name] = f
		for _, name := range userMetrics(f) {
			if defined[name] == nil {
				t.Errorf("%s watches logging.googleapis.com/user/%s, which metrics.tf does not define", b.addr(), name)
			}
		}
	}
	if len(policies) != 2 {
		t.Fatalf("alert policies %v, want dead_letters and static_below_minimum", policies)
	}
	if f := policies["dead_letters"]; !strings.Contains(f, `subscription/num_undelivered_messages`) || !strings.Contains(f, `ends_with("-dead-letter")`) {
		t.Errorf("dead-letter policy filter %q", f)
	}
	for _, b := range m.blocksOf("google_pubsub_subscription") {
		if b.name != "dead_letter" {
			continue
		}
		for _, in := range b.instances {
			if name, _ := str(get(in.value, "name")); !strings.HasSuffix(name, "-dead-letter") {
				t.Errorf("dead-letter subscription %q does not end in -dead-letter: the alert misses it", name)
			}
		}
	}
	if f := policies["static_below_minimum"]; !strings.Contains(f, "flexslurm_"+metrics.GaugeStaticShortfall) {
		t.Errorf("static-minimum policy filter %q", f)
	}
}

// TestLogMetricsReadTheLogLines: each log-based metric's filter matches the
// lines the code logs for it (shared/metrics LogGauges, shared/apply
// LogClusterEvent and LogDecision, as logx writes them and Cloud Run puts
// them in jsonPayload), and no other; its extractors name fields those
// lines carry.
func TestLogMetricsReadTheLogLines(t *testing.T) {
	m := loadModule(t)
	defined := logMetricNames(t, m)
	var buf bytes.Buffer
	log := logx.New(&buf, slog.LevelInfo).With("flow", "flex.reconcile", "cluster", "flexvm")
	metrics.LogGauges(logx.New(&buf, slog.LevelInfo), []metrics.Sample{
		{Name: metrics.GaugeNodes, Cluster: "flexvm", Pool: "a3u", State: "running", Value: 2},
		{Name: metrics.GaugeQueuedRequests, Cluster: "flexvm", Pool: "a3u", Value: 1},
		{Name: metrics.GaugeQueuedAge, Cluster: "flexvm", Pool: "a3u", Value: 60},
		{Name: metrics.GaugeBreakerOpen, Cluster: "flexvm", Pool: "a3u", Value: 0},
		{Name: metrics.GaugeStaticShortfall, Cluster: "flexvm", Pool: "a3u", Value: 1},
	})
	apply.LogClusterEvent(log, plan.ClusterEvent{Type: plan.EventVMRunning, Pool: "a3u", Node: "flexvm-a3u-0", VM: "flexvm-a3u-0-g1", Message: "runs", Wait: 90 * time.Second})
	apply.LogDecision(log, 250*time.Millisecond, false)

	want := map[string]string{ // metric → what identifies its line
		"flexslurm_cluster_events":           "cluster_event=VM_RUNNING",
		"flexslurm_capacity_wait_seconds":    "sample=" + apply.SampleCapacityWait,
		"flexslurm_decision_latency_seconds": "sample=" + apply.SampleDecisionLatency,
	}
	for _, g := range metrics.Gauges {
		want["flexslurm_"+g] = "gauge=" + g
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	for name, id := range want {
		in := defined[name]
		if in == nil {
			t.Errorf("metrics.tf defines no %s", name)
			continue
		}
		filter, _ := str(get(in.value, "filter"))
		x, err := parseFilter(filter)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, filter)
		}
		key, val, _ := strings.Cut(id, "=")
		matched := 0
		for _, l := range lines {
			var p map[string]any
			if err := json.Unmarshal(l, &p); err != nil {
				t.Fatal(err)
			}
			entry := map[string]any{"jsonPayload": p, "resource": map[string]any{"type": "cloud_run_revision",
				"labels": map[string]any{"service_name": "flexslurm-reconcile-tick"}}}
			mine := fmt.Sprint(p[key]) == val
			if got := x.eval(entry); got != mine {
				t.Errorf("%s: filter matches %v the line %s", name, got, l)
				continue
			}
			if !mine {
				continue
			}
			matched++
			extractors := map[string]string{}
			for k, v := range get(in.value, "label_extractors").AsValueMap() {
				extractors[k], _ = str(v)
			}
			if v, ok := str(get(in.value, "value_extractor")); ok {
				extractors["(value)"] = v
				if _, isNum := p[strings.TrimSuffix(strings.TrimPrefix(v, "EXTRACT(jsonPayload."), ")")].(float64); !isNum {
					t.Errorf("%s: value extractor %s reads no number in %s", name, v, l)
				}
			}
			for label, ex := range extractors {
				field := strings.TrimSuffix(strings.TrimPrefix(ex, "EXTRACT(jsonPayload."), ")")
				if label == "state" && key == "gauge" && val != metrics.GaugeNodes {
					continue // only the nodes gauge has a state
				}
				if _, ok := p[field]; !ok {
					t.Errorf("%s: label %s extracts jsonPayload.%s, absent from %s", name, label, field, l)
				}
			}
		}
		if matched != 1 {
			t.Errorf("%s: %d lines of its kind logged, want 1", name, matched)
		}
	}
}

// TestSampleBucketsAreTheLocalOnes: the buckets of each sample metric
// (a distribution) are those the local system's /metrics counts the
// same samples in (shared/metrics SampleBounds), so that a histogram
// reads alike in both.
func TestSampleBucketsAreTheLocalOnes(t *testing.T) {
	defined := logMetricNames(t, loadModule(t))
	for _, name := range []string{"flexslurm_" + apply.SampleDecisionLatency, "flexslurm_" + apply.SampleCapacityWait} {
		in := defined[name]
		if in == nil {
			t.Fatalf("metrics.tf defines no %s", name)
		}
		eb := get(in.value, "bucket_options", 0, "exponential_buckets", 0)
		num := func(attr string) float64 {
			v := get(eb, attr)
			if v == cty.NilVal || v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
				t.Fatalf("%s: exponential_buckets.%s not known (%#v)", name, attr, eb)
			}
			f, _ := v.AsBigFloat().Float64()
			return f
		}
		got := metrics.ExponentialBounds(num("scale"), num("growth_factor"), int(num("num_finite_buckets")))
		if !slices.Equal(got, metrics.SampleBounds) {
			t.Errorf("%s: bounds %v, the local histogram's %v", name, got, metrics.SampleBounds)
		}
	}
}
