package slurm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxHostlistNodes bounds the number of names ExpandHostlist returns (the
// same bound as event.MaxNodesPerEvent): a hostlist above it is rejected
// rather than expanded into an unbounded list.
const MaxHostlistNodes = 10000

// ErrHostlist marks a hostlist expression that cannot be expanded.
var ErrHostlist = errors.New("invalid hostlist")

// ExpandHostlist expands a Slurm hostlist expression, as
// `scontrol show hostnames EXPR` does, into node names in order, without
// duplicates.
//
// The grammar is Slurm's: comma-separated host expressions (commas inside
// brackets belong to the bracket); each expression is literal text with zero
// or more bracket groups, each group a comma-separated list of numbers N or
// ranges N-M (N ≤ M). A lower bound written with leading zeros fixes the
// width ("n[08-10]" is n08 n09 n10). Several groups form their Cartesian
// product ("a[1-2]b[3-4]" is a1b3 a1b4 a2b3 a2b4). Empty expressions
// between commas are ignored; surrounding white space is trimmed.
//
// It returns an error wrapping ErrHostlist for unbalanced brackets, an empty
// or non-numeric range, a reversed range, or more than MaxHostlistNodes
// names. It does not check the names themselves: see ValidNodeName.
func ExpandHostlist(expr string) ([]string, error) {
	parts, err := splitTop(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range parts {
		names, err := expandOne(p, MaxHostlistNodes-len(out))
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrHostlist, expr, err)
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// splitTop splits expr at the commas outside brackets.
func splitTop(expr string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("%w %q: nested '['", ErrHostlist, expr)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("%w %q: ']' without '['", ErrHostlist, expr)
			}
			depth--
		case ',':
			if depth == 0 {
				parts = appendTrimmed(parts, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%w %q: '[' without ']'", ErrHostlist, expr)
	}
	return appendTrimmed(parts, expr[start:]), nil
}

func appendTrimmed(parts []string, s string) []string {
	if s = strings.TrimSpace(s); s != "" {
		parts = append(parts, s)
	}
	return parts
}

// expandOne expands one host expression (no top-level comma) into at most
// limit names.
func expandOne(p string, limit int) ([]string, error) {
	if strings.ContainsAny(p, " \t\r\n") {
		return nil, fmt.Errorf("white space inside %q", p)
	}
	names := []string{""}
	for p != "" {
		i := strings.IndexByte(p, '[')
		if i < 0 {
			for k := range names {
				names[k] += p
			}
			break
		}
		lit := p[:i]
		j := strings.IndexByte(p, ']')
		nums, err := expandRanges(p[i+1 : j])
		if err != nil {
			return nil, err
		}
		if len(names)*len(nums) > limit {
			return nil, fmt.Errorf("more than %d names", MaxHostlistNodes)
		}
		next := make([]string, 0, len(names)*len(nums))
		for _, n := range names {
			for _, num := range nums {
				next = append(next, n+lit+num)
			}
		}
		names = next
		p = p[j+1:]
	}
	if len(names) > limit {
		return nil, fmt.Errorf("more than %d names", MaxHostlistNodes)
	}
	return names, nil
}

// expandRanges expands the inside of one bracket group: "0-3,7,09-11".
func expandRanges(s string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := parseIndex(lo)
		b, errB := parseIndex(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("range %q is not N or N-M with decimal N, M", r)
		}
		if b < a {
			return nil, fmt.Errorf("range %q is reversed", r)
		}
		if b-a >= MaxHostlistNodes {
			return nil, fmt.Errorf("range %q has more than %d numbers", r, MaxHostlistNodes)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

func parseIndex(s string) (int, error) {
	if s == "" || len(s) > 9 {
		return 0, errors.New("bad index")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad index")
		}
	}
	return strconv.Atoi(s)
}

// CompressHostlist returns a Slurm hostlist expression for names, the
// inverse of ExpandHostlist: names that differ only in a trailing decimal
// number are merged into one bracket group ("n-0", "n-1", "n-3" become
// "n-[0-1,3]"), numbers of different zero-padded widths are kept apart, and
// names without a trailing number are listed as they are. Duplicates are
// dropped. Groups are ordered by prefix, numbers ascending. It returns "" for
// no names.
func CompressHostlist(names []string) string {
	type key struct {
		prefix string
		width  int // 0: unpadded
	}
	groups := map[key][]int{}
	var plain []string
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		digits := n[i:]
		if digits == "" || len(digits) > 9 {
			plain = append(plain, n)
			continue
		}
		v, _ := strconv.Atoi(digits)
		k := key{prefix: n[:i]}
		if len(digits) > 1 && digits[0] == '0' {
			k.width = len(digits)
		}
		groups[k] = append(groups[k], v)
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return a.width - b.width
	})
	var parts []string
	for _, k := range keys {
		nums := groups[k]
		slices.Sort(nums)
		nums = slices.Compact(nums)
		if len(nums) == 1 {
			parts = append(parts, fmt.Sprintf("%s%0*d", k.prefix, k.width, nums[0]))
			continue
		}
		var rs []string
		for i := 0; i < len(nums); {
			j := i
			for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
				j++
			}
			if i == j {
				rs = append(rs, fmt.Sprintf("%0*d", k.width, nums[i]))
			} else {
				rs = append(rs, fmt.Sprintf("%0*d-%0*d", k.width, nums[i], k.width, nums[j]))
			}
			i = j + 1
		}
		parts = append(parts, k.prefix+"["+strings.Join(rs, ",")+"]")
	}
	slices.Sort(plain)
	parts = append(parts, slices.Compact(plain)...)
	return strings.Join(parts, ",")
}
