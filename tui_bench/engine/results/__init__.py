"""What runs leave behind: the history store and series, statistics, reports, cards, lines of code."""
