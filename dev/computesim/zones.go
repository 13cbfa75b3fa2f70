package computesim

import (
	"hash/fnv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// zoneGetLocked serves zones.get for any well-formed zone name (the
// simulator has no zone catalog), UP, in the region its name gives. The
// gcloud CLI looks the zone up before zonal commands.
func (s *Sim) zoneGetLocked(req *request) (proto.Message, *apiError) {
	region := req.zone[:strings.LastIndexByte(req.zone, '-')]
	h := fnv.New64a()
	h.Write([]byte(req.zone))
	return &computepb.Zone{
		Kind:              strp("compute#zone"),
		Id:                u64p(2000 + h.Sum64()%1000),
		Name:              strp(req.zone),
		Description:       strp(req.zone),
		Status:            strp("UP"),
		Region:            strp(link("projects/" + req.project + "/regions/" + region)),
		SelfLink:          strp(zoneLink(req.project, req.zone)),
		CreationTimestamp: strp("1969-12-31T16:00:00.000-08:00"),
	}, nil
}
