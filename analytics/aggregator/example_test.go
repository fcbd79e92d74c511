package aggregator_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
)

// Example builds the aggregation consumer on the local stack's Kafka and
// DynamoDB, as `eventpipe consume analytics` does (a program on the
// eventpipe module can also name eventpipe.AnalyticsAggregator among
// eventpipe.NewConsumers' read models): it follows every
// analytics.<source> topic the relay fills and keeps the analytics
// table's sessions and hourly and daily aggregations.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		log.Fatal(err)
	}
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:8000") })
	c, err := aggregator.New(aggregator.Config{
		Kafka:  kafka.SubscriberConfig{Brokers: []string{"127.0.0.1:9092"}},
		Topics: bus.Topics{},
		Client: db,
		Table:  "eventpipe-analytics",
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = c.Run // c.Run(ctx) consumes until ctx ends
}
