package image

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// RefNameAnnotation names an image in an OCI layout's index: tools address
// it as oci:<dir>:<name>.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes img as the only image of a new OCI layout in dir,
// named refName in the index. dir must not hold a layout already: the
// blobs of an earlier image would stay behind.
func WriteLayout(dir string, img v1.Image, refName string) error {
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        img,
		Descriptor: v1.Descriptor{Annotations: map[string]string{RefNameAnnotation: refName}},
	})
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("image: writing the OCI layout in %s: %w", dir, err)
	}
	return nil
}
