package computesim

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Public images the simulator knows from the start, in every project's
// view: images are global and readable across projects.
const (
	// DebianImage is a Debian 12 image of debian-cloud, family debian-12.
	DebianImage = "projects/debian-cloud/global/images/debian-12-bookworm-v20251111"
	// DebianFamily is its family.
	DebianFamily = "projects/debian-cloud/global/images/family/debian-12"
	// SlurmGPUImage is an image of the family flexslurm documents as the
	// default node image: Cluster Toolkit's slurm-gcp Ubuntu 22.04 image
	// with the NVIDIA 570 driver, published by SchedMD in
	// schedmd-slurm-public (cluster-toolkit
	// community/modules/.../schedmd-slurm-gcp-v6-*/source_image_logic.tf).
	SlurmGPUImage = "projects/schedmd-slurm-public/global/images/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20251112"
	// SlurmGPUFamily is its family.
	SlurmGPUFamily = "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570"
)

type imageRec struct {
	seq uint64
	pb  *computepb.Image
}

// imagesLocked returns the image table, seeded with the public images on
// first use. Key: projects/P/global/images/N.
func (s *Sim) imagesLocked() map[string]*imageRec {
	if s.images == nil {
		s.images = map[string]*imageRec{}
		s.addImageLocked("debian-cloud", "debian-12-bookworm-v20251111", "debian-12")
		s.addImageLocked("schedmd-slurm-public", "slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20251112", "slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570")
	}
	return s.images
}

// AddImage makes an image (READY, in family when not "") exist, as an
// operator's images.insert would: for tests and the local system. A later
// image of the same family becomes the family's latest.
func (s *Sim) AddImage(project, name, family string) {
	s.lockForWrite()
	defer s.mu.Unlock()
	s.imagesLocked()
	s.addImageLocked(project, name, family)
}

func (s *Sim) addImageLocked(project, name, family string) {
	key := "projects/" + project + "/global/images/" + name
	img := &computepb.Image{
		Kind: strp("compute#image"), Name: strp(name), Id: u64p(s.newIDLocked()),
		Status: strp(computepb.Image_READY.String()), SelfLink: strp(link(key)),
		CreationTimestamp: strp(formatTime(s.clk.Now())),
	}
	if family != "" {
		img.Family = strp(family)
	}
	s.images[key] = &imageRec{seq: s.nextSeqLocked(), pb: img}
}

func (s *Sim) imageGetLocked(req *request) (proto.Message, *apiError) {
	key := "projects/" + req.project + "/global/images/" + req.name
	if img := s.imagesLocked()[key]; img != nil {
		return img.pb, nil
	}
	return nil, errNotFound(key)
}

// imageFromFamilyLocked answers images.getFromFamily: "the latest image that
// is part of an image family and is not deprecated"
// (https://cloud.google.com/compute/docs/reference/rest/v1/images/getFromFamily).
func (s *Sim) imageFromFamilyLocked(req *request) (proto.Message, *apiError) {
	if img := s.latestInFamilyLocked(req.project, req.name); img != nil {
		return img, nil
	}
	return nil, errNotFound("projects/" + req.project + "/global/images/family/" + req.name)
}

func (s *Sim) latestInFamilyLocked(project, family string) *computepb.Image {
	prefix := "projects/" + project + "/global/images/"
	var best *imageRec
	imgs := s.imagesLocked()
	for _, k := range slices.Sorted(maps.Keys(imgs)) {
		r := imgs[k]
		if strings.HasPrefix(k, prefix) && r.pb.GetFamily() == family && r.pb.GetDeprecated() == nil && (best == nil || r.seq > best.seq) {
			best = r
		}
	}
	if best == nil {
		return nil
	}
	return best.pb
}

// checkSourceImageLocked checks a new boot disk's
// initializeParams.sourceImage, as Compute does when a template is
// inserted or a VM created: an image or image family that exists, given as
// a URL, projects/P/global/images/[family/]N or global/images/[family/]N
// (project-relative).
func (s *Sim) checkSourceImageLocked(field, project, ref string) *apiError {
	rel := ref
	if i := strings.Index(rel, "/compute/v1/"); strings.HasPrefix(rel, "http") && i >= 0 {
		rel = rel[i+len("/compute/v1/"):]
	}
	if strings.HasPrefix(rel, "global/") {
		rel = "projects/" + project + "/" + rel
	}
	seg := strings.Split(rel, "/")
	switch {
	case len(seg) == 5 && seg[0] == "projects" && seg[2] == "global" && seg[3] == "images":
		if s.imagesLocked()[rel] == nil {
			return errInvalidField(field, ref, "The referenced image resource cannot be found.")
		}
	case len(seg) == 6 && seg[0] == "projects" && seg[2] == "global" && seg[3] == "images" && seg[4] == "family":
		if s.latestInFamilyLocked(seg[1], seg[5]) == nil {
			return errInvalidField(field, ref, "The referenced image family cannot be found.")
		}
	default:
		return errInvalidField(field, ref, "The URL is malformed.")
	}
	return nil
}

// checkBootDisksLocked holds the disks of a template or VM to "When
// creating a new instance boot disk, one of initializeParams.sourceImage or
// sourceSnapshot or disks.source is required" (Compute v1 discovery
// document, AttachedDiskInitializeParams.sourceImage). Snapshots and
// existing disks are not simulated, so only sourceImage is accepted.
func (s *Sim) checkBootDisksLocked(field, project string, disks []*computepb.AttachedDisk) *apiError {
	for i, d := range disks {
		if !d.GetBoot() {
			continue
		}
		f := field + ".disks[" + strconv.Itoa(i) + "]"
		switch {
		case d.GetSource() != "":
			return errInvalidField(f+".source", d.GetSource(), "The referenced disk resource cannot be found.")
		case d.GetInitializeParams().GetSourceSnapshot() != "":
			return errInvalidField(f+".initializeParams.sourceSnapshot", d.GetInitializeParams().GetSourceSnapshot(), "The referenced snapshot resource cannot be found.")
		case d.GetInitializeParams().GetSourceImage() == "":
			return errRequired(f + ".initializeParams.sourceImage")
		}
		if aerr := s.checkSourceImageLocked(f+".initializeParams.sourceImage", project, d.GetInitializeParams().GetSourceImage()); aerr != nil {
			return aerr
		}
	}
	return nil
}
