package testenv

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// attrText writes a DynamoDB attribute value as text: strings, numbers
// and binaries as they are stored.
func attrText(b *strings.Builder, v ddbtypes.AttributeValue) {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		b.WriteString(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		b.WriteString(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		b.Write(v.Value)
	case *ddbtypes.AttributeValueMemberSS:
		b.WriteString(strings.Join(v.Value, ","))
	case *ddbtypes.AttributeValueMemberNS:
		b.WriteString(strings.Join(v.Value, ","))
	case *ddbtypes.AttributeValueMemberBS:
		b.Write(bytes.Join(v.Value, []byte(",")))
	case *ddbtypes.AttributeValueMemberM:
		for k, e := range v.Value {
			b.WriteString(k + "=")
			attrText(b, e)
			b.WriteString(";")
		}
	case *ddbtypes.AttributeValueMemberL:
		for _, e := range v.Value {
			attrText(b, e)
			b.WriteString(";")
		}
	case *ddbtypes.AttributeValueMemberBOOL:
		fmt.Fprint(b, v.Value)
	}
}

// TableDump is every item of a DynamoDB table as text (a strongly
// consistent scan): each attribute as name=value, the strings, numbers
// and binaries as stored, for a byte search of what the table holds.
func TableDump(tb testing.TB, db *dynamodb.Client, table string) string {
	tb.Helper()
	var b strings.Builder
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			tb.Fatalf("scan %s: %v", table, err)
		}
		for _, it := range out.Items {
			for k, v := range it {
				b.WriteString(k + "=")
				attrText(&b, v)
				b.WriteString(" ")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
