package event

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

// AuditKind classifies a Compute Engine audit-log entry about a VM.
type AuditKind string

// Audit entry kinds that matter to flexslurm.
const (
	// AuditDeferredDelete / AuditDeferredStop: the system events logged when
	// a VM's max run duration elapses with termination action DELETE / STOP
	// (compute.instances.deferredDelete / deferredStop — reported by users;
	// https://cloud.google.com/compute/docs/logging/audit-logging does not list them, so both these and AuditDelete are handled).
	AuditDeferredDelete AuditKind = "deferredDelete"
	AuditDeferredStop   AuditKind = "deferredStop"
	// AuditDelete: VERSION.compute.instances.delete (Admin Activity: v1,
	// beta, alpha; DeleteMethodPattern), by a user,
	// by flexslurm, or by the MIG's service agent when a resize-request VM
	// reaches the end of its run duration.
	AuditDelete AuditKind = "delete"
	// AuditInterruption: other system terminations (preempted, hostError,
	// terminateOnHostMaintenance, guestTerminate, …).
	AuditInterruption AuditKind = "interruption"
	// AuditOther: anything else; ignored.
	AuditOther AuditKind = "other"
)

// Audit is the part of a Compute Engine audit LogEntry flexslurm reads.
type Audit struct {
	Kind        AuditKind
	Method      string // protoPayload.methodName
	SystemEvent bool   // logName is …/cloudaudit.googleapis.com%2Fsystem_event
	Principal   string // protoPayload.authenticationInfo.principalEmail
	Project     string
	Zone        string
	Instance    string // instance name, from resourceName
	InstanceID  string // resource.labels.instance_id
	InsertID    string
	OperationID string
	First, Last bool // operation.first / operation.last (both true for system events)
	Timestamp   time.Time
}

type logEntry struct {
	LogName      string `json:"logName"`
	InsertID     string `json:"insertId"`
	Timestamp    string `json:"timestamp"`
	ProtoPayload struct {
		MethodName         string `json:"methodName"`
		ResourceName       string `json:"resourceName"`
		ServiceName        string `json:"serviceName"`
		AuthenticationInfo struct {
			PrincipalEmail string `json:"principalEmail"`
		} `json:"authenticationInfo"`
	} `json:"protoPayload"`
	Resource struct {
		Type   string            `json:"type"`
		Labels map[string]string `json:"labels"`
	} `json:"resource"`
	Operation struct {
		ID       string `json:"id"`
		Producer string `json:"producer"`
		First    bool   `json:"first"`
		Last     bool   `json:"last"`
	} `json:"operation"`
}

var instanceResourceRe = regexp.MustCompile(`^projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$`)

// DeleteMethodPattern matches the Admin Activity method name of a VM delete
// through any Compute API version: v1.compute.instances.delete,
// beta.compute.instances.delete, … (audit method names carry the version the
// caller used; googleapis/google-cloudevents AUDIT_CATALOG.md lists both v1
// and beta). It is RE2, as the Logging query language's =~ operator takes,
// and deploy/events.tf's sink filter uses this exact pattern, so the sink
// routes what the decoder recognises (deploy/logfilter_test.go).
const DeleteMethodPattern = `^[a-z0-9]+[.]compute[.]instances[.]delete$`

var deleteMethodRe = regexp.MustCompile(DeleteMethodPattern)

var interruptions = map[string]bool{
	"compute.instances.preempted":                  true,
	"compute.instances.hostError":                  true,
	"compute.instances.terminateOnHostMaintenance": true,
	"compute.instances.guestTerminate":             true,
}

// DecodeAudit decodes a LogEntry JSON delivered by a Logging sink to Pub/Sub
// (https://cloud.google.com/logging/docs/export/pubsub, https://cloud.google.com/compute/docs/logging/audit-logging). Only entries about Compute Engine instances decode; any
// other entry is ErrMalformed.
func DecodeAudit(data []byte) (*Audit, error) {
	if len(data) > MaxPayloadBytes {
		return nil, malformed("log entry is %d bytes, above the %d-byte limit", len(data), MaxPayloadBytes)
	}
	var le logEntry
	if err := json.Unmarshal(data, &le); err != nil {
		return nil, malformed("decoding log entry: %v", err)
	}
	if le.ProtoPayload.ServiceName != "compute.googleapis.com" {
		return nil, malformed("log entry %q is from service %q, not compute.googleapis.com", le.InsertID, le.ProtoPayload.ServiceName)
	}
	m := instanceResourceRe.FindStringSubmatch(le.ProtoPayload.ResourceName)
	if m == nil {
		return nil, malformed("log entry %q: resourceName %q is not an instance", le.InsertID, le.ProtoPayload.ResourceName)
	}
	a := &Audit{
		Method:      le.ProtoPayload.MethodName,
		SystemEvent: strings.HasSuffix(le.LogName, "cloudaudit.googleapis.com%2Fsystem_event") || strings.HasSuffix(le.LogName, "cloudaudit.googleapis.com/system_event"),
		Principal:   le.ProtoPayload.AuthenticationInfo.PrincipalEmail,
		Project:     m[1],
		Zone:        m[2],
		Instance:    m[3],
		InstanceID:  le.Resource.Labels["instance_id"],
		InsertID:    le.InsertID,
		OperationID: le.Operation.ID,
		First:       le.Operation.First,
		Last:        le.Operation.Last,
	}
	if le.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, le.Timestamp)
		if err != nil {
			return nil, malformed("log entry %q: timestamp %q: %v", le.InsertID, le.Timestamp, err)
		}
		a.Timestamp = t
	}
	if le.Operation.ID == "" {
		// Entries without an operation are single entries.
		a.First, a.Last = true, true
	}
	switch method := a.Method; {
	case method == "compute.instances.deferredDelete":
		a.Kind = AuditDeferredDelete
	case method == "compute.instances.deferredStop":
		a.Kind = AuditDeferredStop
	case deleteMethodRe.MatchString(method) && !a.SystemEvent:
		a.Kind = AuditDelete
	case interruptions[method]:
		a.Kind = AuditInterruption
	default:
		a.Kind = AuditOther
	}
	return a, nil
}

// ServiceAgent reports whether principal is a project's Google APIs service
// agent (PROJECT_NUMBER@cloudservices.<domain>), the identity under which a
// MIG deletes its VMs. The domain differs per universe (https://documentation.s3ns.fr/docs/overview/tpc-key-differences), so any
// domain is accepted.
func ServiceAgent(principal string) bool {
	local, domain, ok := strings.Cut(principal, "@")
	if !ok || local == "" || !strings.HasPrefix(domain, "cloudservices.") {
		return false
	}
	for _, r := range local {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
