package dynamodb

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestItemSizeCountsNamesAndValuesTheDynamoDBWay(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	cases := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string", map[string]types.AttributeValue{"pk": s("abc")}, 2 + 3},
		{"utf-8 string", map[string]types.AttributeValue{"é": s("日本")}, 2 + 6},
		{"number", map[string]types.AttributeValue{"n": n("12345")}, 1 + 1 + 3},
		{"number zeros trimmed", map[string]types.AttributeValue{"n": n("-000120.500")}, 1 + 1 + 2},
		{"zero", map[string]types.AttributeValue{"n": n("0")}, 1 + 1},
		{"bool and null", map[string]types.AttributeValue{"b": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"binary", map[string]types.AttributeValue{"bin": &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}}}, 3 + 4},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), s("c")}}}, 1 + 3 + (1 + 2) + (1 + 1)},
		{"map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("vv")}}}, 1 + 3 + 1 + 1 + 2},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bcd"}}}, 2 + 4},
	}
	for _, tc := range cases {
		if got := ItemSize(tc.item); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestKeysPadSequencesAndParseBack(t *testing.T) {
	if got := EventSK(42); got != "EVENT#000000000042" {
		t.Fatalf("EventSK(42) = %s", got)
	}
	if got := OutboundSK(4, 1); got != "OUTBOUND#000000000004#1" {
		t.Fatalf("OutboundSK = %s", got)
	}
	for _, sk := range []string{EventSK(999_999_999_999), OutboundSK(7, 3)} {
		if _, err := SeqFromSK(sk); err != nil {
			t.Fatalf("%s: %v", sk, err)
		}
	}
	if _, err := SeqFromSK("STATE"); err == nil {
		t.Fatal("STATE has no sequence")
	}
	if EventSK(9) >= EventSK(10) {
		t.Fatal("padded keys must sort numerically")
	}
}
