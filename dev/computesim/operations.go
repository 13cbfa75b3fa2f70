package computesim

import (
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// opKey is the map key of an operation: zonal if zone is set, else global.
// A regional scope is written "regions/R" (request.opScope).
func opKey(project, zone, name string) string {
	if strings.HasPrefix(zone, "regions/") {
		return "projects/" + project + "/" + zone + "/operations/" + name
	}
	if zone == "" {
		return "projects/" + project + "/global/operations/" + name
	}
	return "projects/" + project + "/" + scopeOf(zone) + "/operations/" + name
}

// newOpLocked records a finished (DONE) operation and returns it. Every
// operation the simulator returns is stored, so it can be polled.
func (s *Sim) newOpLocked(project, zone, opType, targetLink string, targetID uint64, user string, at time.Time) *computepb.Operation {
	name := s.uniqueLocked(func() string {
		return fmt.Sprintf("operation-%d-%s-%s-%s", at.UnixMilli(), s.hexLocked(13), s.hexLocked(8), s.hexLocked(8))
	})
	ts := strp(formatTime(at))
	op := &computepb.Operation{
		Kind:          strp("compute#operation"),
		Id:            u64p(s.newIDLocked()),
		Name:          strp(name),
		OperationType: strp(opType),
		TargetLink:    strp(targetLink),
		User:          strp(user),
		Status:        computepb.Operation_DONE.Enum(),
		Progress:      i32p(100),
		InsertTime:    ts,
		StartTime:     ts,
		EndTime:       ts,
		SelfLink:      strp(link(opKey(project, zone, name))),
	}
	if targetID != 0 {
		op.TargetId = u64p(targetID)
	}
	switch {
	case isRegionName(zone):
		op.Region = strp(regionLink(project, zone))
	case strings.HasPrefix(zone, "regions/"):
		op.Region = strp(link("projects/" + project + "/" + zone))
	case zone != "":
		op.Zone = strp(zoneLink(project, zone))
	}
	s.ops[opKey(project, zone, name)] = op
	return op
}

// failOp marks a stored operation as ended with an error, as Compute
// reports failures found after the call was accepted: status DONE,
// error.errors[] and httpErrorStatusCode/httpErrorMessage.
func failOp(op *computepb.Operation, httpStatus int, code, message string) {
	op.Error = &computepb.Error{Errors: []*computepb.Errors{{Code: strp(code), Message: strp(message)}}}
	if httpStatus >= 200 && httpStatus <= 299 {
		// Some failed operations carry no HTTP error status at all; for
		// them (*compute.Operation).Wait returns nil (https://github.com/googleapis/google-cloud-go/blob/main/compute/apiv1/operations.go).
		return
	}
	op.HttpErrorStatusCode = i32p(int32(httpStatus))
	op.HttpErrorMessage = strp(httpErrorMessage(httpStatus))
}

// httpErrorMessage is the upper-case reason phrase Compute puts in
// Operation.httpErrorMessage ("BAD REQUEST", "SERVICE UNAVAILABLE").
func httpErrorMessage(code int) string {
	switch code {
	case 400:
		return "BAD REQUEST"
	case 403:
		return "FORBIDDEN"
	case 404:
		return "NOT FOUND"
	case 409:
		return "CONFLICT"
	case 412:
		return "PRECONDITION FAILED"
	case 429:
		return "TOO MANY REQUESTS"
	case 500:
		return "INTERNAL SERVER ERROR"
	case 503:
		return "SERVICE UNAVAILABLE"
	}
	return fmt.Sprintf("HTTP %d", code)
}

// runningView is the operation as returned by the mutating call itself:
// RUNNING, no end time, no outcome yet. The first poll returns it DONE.
func runningView(op *computepb.Operation) *computepb.Operation {
	v := proto.CloneOf(op)
	v.Status = computepb.Operation_RUNNING.Enum()
	v.Progress = i32p(0)
	v.EndTime = nil
	v.Error = nil
	v.HttpErrorStatusCode = nil
	v.HttpErrorMessage = nil
	return v
}

// operationGetLocked serves operations get and wait. Operations are DONE as
// soon as they exist, so wait returns at once.
func (s *Sim) operationGetLocked(req *request) (proto.Message, *apiError) {
	key := opKey(req.project, req.opScope(), req.name)
	op := s.ops[key]
	if op == nil {
		return nil, errNotFound(key)
	}
	return op, nil
}
