package health

import "github.com/google/go-cmp/cmp/cmpopts"

// cmpEmptyNil treats nil and empty slices alike when comparing findings.
var cmpEmptyNil = cmpopts.EquateEmpty()
