"""The board: a web page over the queue for the people who run the agents."""
