// Package modeltest fills records for tests that must cover every field a
// record has, including fields added later: a deep copy that shares
// nothing, an equality that compares everything.
package modeltest

import (
	"fmt"
	"reflect"
	"time"
)

var timeType = reflect.TypeOf(time.Time{})

// Fill sets every settable field reachable from ptr (a non-nil pointer) to
// a non-zero value, with two entries in each slice and map and every
// pointer set. Values are drawn from a counter in a fixed order, so two
// records of the same type are filled alike; times are whole seconds in
// UTC.
func Fill(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("modeltest.Fill: want a non-nil pointer, got %T", ptr))
	}
	fill(v.Elem(), new(int))
}

func fill(v reflect.Value, n *int) {
	*n++
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(time.Unix(int64(*n)*1000, 0).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n % 200))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(f, n)
			}
		}
	}
}
