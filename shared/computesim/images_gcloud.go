package computesim

// Minimal public images, so that an outside client such as the gcloud CLI,
// which resolves --image-family through images.getFromFamily before it
// creates a template, can run against the simulator. This is deliberately
// small: a fixed catalog of public image families, served read-only from
// any image project. A fuller image model (project images, validation of a
// template's boot image) belongs with the template rules and supersedes
// this file.

import (
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// publicImage is one image of the catalog.
type publicImage struct {
	project, family, name string
	id                    uint64
	diskSizeGb            int64
}

// publicImages are the newest images of a few public families (names as
// Google publishes them: FAMILY-CODENAME-vYYYYMMDD).
var publicImages = []publicImage{
	{project: "debian-cloud", family: "debian-12", name: "debian-12-bookworm-v20261111", id: 4711000000000000012, diskSizeGb: 10},
	{project: "debian-cloud", family: "debian-13", name: "debian-13-trixie-v20261111", id: 4711000000000000013, diskSizeGb: 10},
	{project: "ubuntu-os-accelerator-images", family: "ubuntu-accelerator-2404-amd64-with-nvidia-580", name: "ubuntu-accelerator-2404-amd64-with-nvidia-580-v20261110", id: 4711000000000002404, diskSizeGb: 50},
}

// imagesMethod routes global/images/... paths (seg starts after
// projects/P/global/images).
func imagesMethod(method string, seg []string, req *request) string {
	if method != "GET" {
		return ""
	}
	switch {
	case len(seg) == 1:
		req.name = seg[0]
		return "images.get"
	case len(seg) == 2 && seg[0] == "family":
		req.name = seg[1]
		return "images.getFromFamily"
	}
	return ""
}

// imageGetLocked serves images.get and images.getFromFamily.
func (s *Sim) imageGetLocked(req *request) (proto.Message, *apiError) {
	for _, im := range publicImages {
		if im.project != req.project {
			continue
		}
		if (req.method == "images.get" && im.name == req.name) || (req.method == "images.getFromFamily" && im.family == req.name) {
			return &computepb.Image{
				Kind:              strp("compute#image"),
				Id:                u64p(im.id),
				Name:              strp(im.name),
				Family:            strp(im.family),
				SelfLink:          strp(link("projects/" + im.project + "/global/images/" + im.name)),
				Status:            strp("READY"),
				Architecture:      strp("X86_64"),
				DiskSizeGb:        proto.Int64(im.diskSizeGb),
				SourceType:        strp("RAW"),
				CreationTimestamp: strp("2026-11-11T00:00:00.000-08:00"),
			}, nil
		}
	}
	if req.method == "images.getFromFamily" {
		return nil, errNotFound("projects/" + req.project + "/global/images/family/" + req.name)
	}
	return nil, errNotFound("projects/" + req.project + "/global/images/" + req.name)
}
