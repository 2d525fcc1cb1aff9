"""Example jobs: ``order_generator`` fills a topic with order events, ``order_stats`` reads them."""
