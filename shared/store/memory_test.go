package store_test

import (
	"testing"

	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t,
		func(*testing.T) store.Store { return store.NewMemory(nil) },
		storetest.WithWriteCounter(func(s store.Store) int64 { return int64(s.(*store.Memory).Writes) }),
	)
}
