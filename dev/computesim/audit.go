package computesim

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// The audit LogEntry JSON written for VM deletions, in the shape a Logging
// sink publishes to Pub/Sub (https://cloud.google.com/logging/docs/export/pubsub, https://cloud.google.com/compute/docs/logging/audit-logging): Admin Activity entries for API
// and MIG deletions (methodName v1.compute.instances.delete, severity NOTICE,
// two entries per operation: first and last) and a System Event entry for the
// end of a run (methodName compute.instances.deferredDelete, severity INFO,
// one entry with first and last).

type logEntry struct {
	ProtoPayload     auditLog          `json:"protoPayload"`
	InsertID         string            `json:"insertId"`
	Resource         monitoredResource `json:"resource"`
	Timestamp        string            `json:"timestamp"`
	Severity         string            `json:"severity"`
	LogName          string            `json:"logName"`
	Operation        logOperation      `json:"operation"`
	ReceiveTimestamp string            `json:"receiveTimestamp"`
}

type auditLog struct {
	Type               string              `json:"@type"`
	Status             *auditStatus        `json:"status,omitempty"`
	AuthenticationInfo authenticationInfo  `json:"authenticationInfo"`
	RequestMetadata    *requestMetadata    `json:"requestMetadata,omitempty"`
	ServiceName        string              `json:"serviceName"`
	MethodName         string              `json:"methodName"`
	AuthorizationInfo  []authorizationInfo `json:"authorizationInfo,omitempty"`
	ResourceName       string              `json:"resourceName"`
	Request            map[string]any      `json:"request,omitempty"`
	Response           map[string]any      `json:"response,omitempty"`
	ResourceLocation   *resourceLocation   `json:"resourceLocation,omitempty"`
}

type auditStatus struct {
	Message string `json:"message,omitempty"`
}

type authenticationInfo struct {
	PrincipalEmail string `json:"principalEmail"`
}

type requestMetadata struct {
	CallerIP                string `json:"callerIp,omitempty"`
	CallerSuppliedUserAgent string `json:"callerSuppliedUserAgent,omitempty"`
}

type authorizationInfo struct {
	Permission         string `json:"permission"`
	Granted            bool   `json:"granted"`
	ResourceAttributes struct {
		Service string `json:"service"`
		Name    string `json:"name"`
		Type    string `json:"type"`
	} `json:"resourceAttributes"`
}

type resourceLocation struct {
	CurrentLocations []string `json:"currentLocations"`
}

type monitoredResource struct {
	Type   string            `json:"type"`
	Labels map[string]string `json:"labels"`
}

type logOperation struct {
	ID       string `json:"id"`
	Producer string `json:"producer"`
	First    bool   `json:"first,omitempty"`
	Last     bool   `json:"last,omitempty"`
}

func (s *Sim) baseEntryLocked(in *instanceRec, at time.Time) logEntry {
	ts := at.UTC().Format(time.RFC3339Nano)
	return logEntry{
		InsertID: s.uniqueLocked(func() string { return "-" + s.randStringLocked(lowerAlnum, 12) }),
		Resource: monitoredResource{Type: "gce_instance", Labels: map[string]string{
			"instance_id": strconv.FormatUint(in.pb.GetId(), 10),
			"project_id":  in.project,
			"zone":        in.zone,
		}},
		Timestamp:        ts,
		ReceiveTimestamp: ts,
	}
}

// auditDeleteLocked writes the Admin Activity entry of a VM deletion: the
// first entry when it starts (with the request and the operation as
// response), the last when it is done.
func (s *Sim) auditDeleteLocked(in *instanceRec, at time.Time, first bool, op *computepb.Operation) {
	e := s.baseEntryLocked(in, at)
	resourceName := "projects/" + in.project + "/zones/" + in.zone + "/instances/" + in.name
	e.Severity = "NOTICE"
	e.LogName = "projects/" + in.project + "/logs/cloudaudit.googleapis.com%2Factivity"
	e.Operation = logOperation{ID: in.deleteOpID, Producer: "compute.googleapis.com", First: first, Last: !first}
	e.ProtoPayload = auditLog{
		Type:               "type.googleapis.com/google.cloud.audit.AuditLog",
		AuthenticationInfo: authenticationInfo{PrincipalEmail: in.deletePrincipal},
		ServiceName:        "compute.googleapis.com",
		MethodName:         "v1.compute.instances.delete",
		ResourceName:       resourceName,
	}
	if first {
		az := authorizationInfo{Permission: "compute.instances.delete", Granted: true}
		az.ResourceAttributes.Service = "compute"
		az.ResourceAttributes.Name = resourceName
		az.ResourceAttributes.Type = "compute.instances"
		e.ProtoPayload.AuthorizationInfo = []authorizationInfo{az}
		e.ProtoPayload.Request = map[string]any{"@type": "type.googleapis.com/compute.instances.delete"}
		e.ProtoPayload.ResourceLocation = &resourceLocation{CurrentLocations: []string{in.zone}}
		if in.deleteCause == causeAPI {
			e.ProtoPayload.RequestMetadata = &requestMetadata{CallerIP: in.callerIP, CallerSuppliedUserAgent: in.userAgent}
		}
		if op != nil {
			e.ProtoPayload.Response = map[string]any{
				"@type":          "type.googleapis.com/operation",
				"id":             strconv.FormatUint(op.GetId(), 10),
				"name":           op.GetName(),
				"operationType":  op.GetOperationType(),
				"progress":       "0",
				"status":         "RUNNING",
				"targetId":       strconv.FormatUint(in.pb.GetId(), 10),
				"targetLink":     op.GetTargetLink(),
				"user":           op.GetUser(),
				"zone":           op.GetZone(),
				"insertTime":     op.GetInsertTime(),
				"startTime":      op.GetStartTime(),
				"selfLink":       op.GetSelfLink(),
				"selfLinkWithId": op.GetSelfLink(),
			}
		}
	} else {
		e.ProtoPayload.Request = map[string]any{"@type": "type.googleapis.com/compute.instances.delete"}
	}
	s.writeAuditLocked(e)
}

// auditDeferredDeleteLocked writes the System Event entry of a VM deleted at
// the end of its run duration.
func (s *Sim) auditDeferredDeleteLocked(in *instanceRec, at time.Time) {
	e := s.baseEntryLocked(in, at)
	e.Severity = "INFO"
	e.LogName = "projects/" + in.project + "/logs/cloudaudit.googleapis.com%2Fsystem_event"
	e.Operation = logOperation{ID: in.deleteOpID, Producer: "compute.instances.deferredDelete", First: true, Last: true}
	e.ProtoPayload = auditLog{
		Type:               "type.googleapis.com/google.cloud.audit.AuditLog",
		Status:             &auditStatus{},
		AuthenticationInfo: authenticationInfo{PrincipalEmail: "system@google.com"},
		ServiceName:        "compute.googleapis.com",
		MethodName:         "compute.instances.deferredDelete",
		ResourceName:       "projects/" + in.project + "/zones/" + in.zone + "/instances/" + in.name,
		Request:            map[string]any{"@type": "type.googleapis.com/compute.instances.deferredDelete"},
	}
	s.writeAuditLocked(e)
}

// writeAuditLocked records an entry and schedules its delivery to the sink.
func (s *Sim) writeAuditLocked(e logEntry) {
	data, err := json.Marshal(e)
	if err != nil {
		s.opts.Logger.Error("computesim: encoding audit entry", "err", err)
		return
	}
	attrs := map[string]string{AuditTimestampAttr: e.Timestamp}
	s.audit = append(s.audit, AuditEntry{Data: data, Attrs: attrs})
	sink, logger := s.opts.AuditSink, s.opts.Logger
	if sink == nil {
		return
	}
	s.emitLocked(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sink(ctx, data, map[string]string{AuditTimestampAttr: e.Timestamp}); err != nil {
			logger.Warn("computesim: audit sink rejected entry; dropped", "insertId", e.InsertID, "err", err)
		}
	})
}
