"""Word pools the schema backend fabricates answers from (all invented or public-domain facts).

Separate from the synthetic suite's pools (``slca_grpo.data.synthetic.values``), some of the same
name: those hold the enum values and records the suite's tools and tasks are written around
(``"italian"``, a city with its airport), these hold display values for any tool's answers
(``"Italian"``, a city with its coordinates and currency); sharing one set would change every
seeded task or answer.
"""

from __future__ import annotations

FIRST_NAMES = (
    "Alice Bruno Chloe Daniel Elena Farid Grace Hiro Isabel James Keiko Liam Maya Noah Olivia"
    " Pedro Quinn Rosa Samuel Tara Umar Vera William Ximena Yusuf Zoe Aiden Beatriz Carlos Dana"
    " Emma Felix Hannah Ivan Julia Kofi Laura Mateo Nina Oscar"
).split()
LAST_NAMES = (
    "Anderson Becker Chen Dubois Evans Fischer Garcia Hansen Ito Johnson Kim Lopez Martin"
    " Nakamura Okafor Patel Quintero Rossi Schmidt Tanaka Usman Varga Walker Xu Yilmaz Zhang"
    " Silva Novak Murphy Kowalski Haddad Singh Costa Moreau Larsen"
).split()

# city, country, ISO code, latitude, longitude, IANA time zone, currency
CITIES = (
    ("New York", "United States", "US", 40.7128, -74.006, "America/New_York", "USD"),
    ("San Francisco", "United States", "US", 37.7749, -122.4194, "America/Los_Angeles", "USD"),
    ("Chicago", "United States", "US", 41.8781, -87.6298, "America/Chicago", "USD"),
    ("Austin", "United States", "US", 30.2672, -97.7431, "America/Chicago", "USD"),
    ("Seattle", "United States", "US", 47.6062, -122.3321, "America/Los_Angeles", "USD"),
    ("Toronto", "Canada", "CA", 43.6532, -79.3832, "America/Toronto", "CAD"),
    ("Vancouver", "Canada", "CA", 49.2827, -123.1207, "America/Vancouver", "CAD"),
    ("Mexico City", "Mexico", "MX", 19.4326, -99.1332, "America/Mexico_City", "MXN"),
    ("São Paulo", "Brazil", "BR", -23.5505, -46.6333, "America/Sao_Paulo", "BRL"),
    ("Buenos Aires", "Argentina", "AR", -34.6037, -58.3816, "America/Argentina/Buenos_Aires", "ARS"),
    ("London", "United Kingdom", "GB", 51.5074, -0.1278, "Europe/London", "GBP"),
    ("Paris", "France", "FR", 48.8566, 2.3522, "Europe/Paris", "EUR"),
    ("Berlin", "Germany", "DE", 52.52, 13.405, "Europe/Berlin", "EUR"),
    ("Madrid", "Spain", "ES", 40.4168, -3.7038, "Europe/Madrid", "EUR"),
    ("Rome", "Italy", "IT", 41.9028, 12.4964, "Europe/Rome", "EUR"),
    ("Amsterdam", "Netherlands", "NL", 52.3676, 4.9041, "Europe/Amsterdam", "EUR"),
    ("Stockholm", "Sweden", "SE", 59.3293, 18.0686, "Europe/Stockholm", "SEK"),
    ("Zurich", "Switzerland", "CH", 47.3769, 8.5417, "Europe/Zurich", "CHF"),
    ("Vienna", "Austria", "AT", 48.2082, 16.3738, "Europe/Vienna", "EUR"),
    ("Istanbul", "Turkey", "TR", 41.0082, 28.9784, "Europe/Istanbul", "TRY"),
    ("Dubai", "United Arab Emirates", "AE", 25.2048, 55.2708, "Asia/Dubai", "AED"),
    ("Cairo", "Egypt", "EG", 30.0444, 31.2357, "Africa/Cairo", "EGP"),
    ("Nairobi", "Kenya", "KE", -1.2921, 36.8219, "Africa/Nairobi", "KES"),
    ("Lagos", "Nigeria", "NG", 6.5244, 3.3792, "Africa/Lagos", "NGN"),
    ("Cape Town", "South Africa", "ZA", -33.9249, 18.4241, "Africa/Johannesburg", "ZAR"),
    ("Mumbai", "India", "IN", 19.076, 72.8777, "Asia/Kolkata", "INR"),
    ("Bangalore", "India", "IN", 12.9716, 77.5946, "Asia/Kolkata", "INR"),
    ("Singapore", "Singapore", "SG", 1.3521, 103.8198, "Asia/Singapore", "SGD"),
    ("Bangkok", "Thailand", "TH", 13.7563, 100.5018, "Asia/Bangkok", "THB"),
    ("Hong Kong", "China", "HK", 22.3193, 114.1694, "Asia/Hong_Kong", "HKD"),
    ("Shanghai", "China", "CN", 31.2304, 121.4737, "Asia/Shanghai", "CNY"),
    ("Beijing", "China", "CN", 39.9042, 116.4074, "Asia/Shanghai", "CNY"),
    ("Seoul", "South Korea", "KR", 37.5665, 126.978, "Asia/Seoul", "KRW"),
    ("Tokyo", "Japan", "JP", 35.6762, 139.6503, "Asia/Tokyo", "JPY"),
    ("Osaka", "Japan", "JP", 34.6937, 135.5023, "Asia/Tokyo", "JPY"),
    ("Sydney", "Australia", "AU", -33.8688, 151.2093, "Australia/Sydney", "AUD"),
    ("Melbourne", "Australia", "AU", -37.8136, 144.9631, "Australia/Melbourne", "AUD"),
    ("Auckland", "New Zealand", "NZ", -36.8485, 174.7633, "Pacific/Auckland", "NZD"),
)
STREETS = (
    "Main Street",
    "Oak Avenue",
    "Maple Drive",
    "Park Lane",
    "River Road",
    "Market Street",
    "King Street",
    "Station Road",
    "High Street",
    "Elm Street",
    "Harbor Boulevard",
    "Sunset Boulevard",
    "Church Street",
    "Mill Lane",
    "Lakeview Terrace",
    "Cedar Court",
)
COMPANIES = (
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Labs",
    "Stark Industries",
    "Wayne Enterprises",
    "Northwind Traders",
    "Contoso",
    "Fabrikam",
    "Blue Harbor Co.",
    "Summit Analytics",
    "Greenleaf Foods",
    "Brightline Media",
    "Ironclad Systems",
    "Pioneer Logistics",
    "Redwood Health",
)
AIRLINES = (
    ("United Airlines", "UA"),
    ("Delta Air Lines", "DL"),
    ("American Airlines", "AA"),
    ("Lufthansa", "LH"),
    ("Air France", "AF"),
    ("British Airways", "BA"),
    ("Emirates", "EK"),
    ("Singapore Airlines", "SQ"),
    ("Qantas", "QF"),
    ("Japan Airlines", "JL"),
    ("KLM", "KL"),
    ("Air Canada", "AC"),
)
AIRPORTS = (
    "JFK",
    "SFO",
    "ORD",
    "LAX",
    "SEA",
    "YYZ",
    "LHR",
    "CDG",
    "FRA",
    "MAD",
    "FCO",
    "AMS",
    "DXB",
    "SIN",
    "HND",
    "SYD",
    "BOM",
    "ICN",
)
HOTEL_WORDS = (
    "Grand",
    "Royal",
    "Harbor",
    "City",
    "Park",
    "Riverside",
    "Garden",
    "Plaza",
    "Central",
    "Skyline",
    "Heritage",
    "Lakeside",
)
HOTEL_KINDS = ("Hotel", "Inn", "Suites", "Resort", "Lodge", "Boutique Hotel")
RESTAURANT_WORDS = (
    "Golden",
    "Little",
    "Blue",
    "Rustic",
    "Olive",
    "Copper",
    "Saffron",
    "Green",
    "Silver",
    "Old Town",
)
RESTAURANT_KINDS = ("Bistro", "Kitchen", "Grill", "Trattoria", "Table", "Cafe", "Diner", "House")
CUISINES = (
    "Italian",
    "Japanese",
    "Mexican",
    "Indian",
    "French",
    "Thai",
    "Chinese",
    "Mediterranean",
    "American",
    "Korean",
    "Vietnamese",
    "Greek",
)
PRODUCT_ADJECTIVES = (
    "Wireless",
    "Ergonomic",
    "Portable",
    "Smart",
    "Classic",
    "Ultra",
    "Compact",
    "Premium",
    "Eco",
    "Pro",
)
PRODUCT_NOUNS = (
    "Headphones",
    "Keyboard",
    "Backpack",
    "Water Bottle",
    "Desk Lamp",
    "Running Shoes",
    "Coffee Maker",
    "Monitor",
    "Notebook",
    "Speaker",
    "Jacket",
    "Blender",
)
PRODUCT_CATEGORIES = (
    "Electronics",
    "Home & Kitchen",
    "Sports",
    "Books",
    "Clothing",
    "Toys",
    "Beauty",
    "Office Supplies",
    "Garden",
    "Grocery",
)
TITLE_ADJECTIVES = (
    "Silent",
    "Hidden",
    "Last",
    "Golden",
    "Broken",
    "Endless",
    "Midnight",
    "Lost",
    "Bright",
    "Secret",
    "Distant",
    "Wild",
)
TITLE_NOUNS = (
    "River",
    "Garden",
    "Horizon",
    "Empire",
    "Voyage",
    "Signal",
    "Harbor",
    "Kingdom",
    "Echo",
    "Frontier",
    "Letter",
    "Summer",
)
GENRES = (
    "Drama",
    "Comedy",
    "Thriller",
    "Science Fiction",
    "Documentary",
    "Romance",
    "Action",
    "Fantasy",
    "Mystery",
    "Animation",
)
MUSIC_GENRES = ("Pop", "Rock", "Jazz", "Hip-Hop", "Classical", "Electronic", "Folk", "R&B")
WEATHER_CONDITIONS = (
    "Sunny",
    "Partly cloudy",
    "Cloudy",
    "Light rain",
    "Overcast",
    "Clear",
    "Showers",
    "Thunderstorms",
    "Fog",
    "Light snow",
)
COLORS = ("black", "white", "red", "blue", "green", "silver", "navy", "gray", "beige", "yellow")
LANGUAGES = (
    ("English", "en"),
    ("Spanish", "es"),
    ("French", "fr"),
    ("German", "de"),
    ("Japanese", "ja"),
    ("Chinese", "zh"),
    ("Portuguese", "pt"),
    ("Italian", "it"),
    ("Korean", "ko"),
    ("Arabic", "ar"),
)
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "CNY", "INR", "SGD")
# Rough units of each currency per US dollar, for plausible exchange rates.
USD_RATES = {
    "USD": 1.0,
    "EUR": 0.92,
    "GBP": 0.79,
    "JPY": 151.0,
    "CAD": 1.36,
    "AUD": 1.52,
    "CHF": 0.9,
    "CNY": 7.2,
    "INR": 83.2,
    "SGD": 1.34,
    "MXN": 17.1,
    "BRL": 5.0,
}
TICKERS = (
    ("AAPL", "Apple Inc."),
    ("MSFT", "Microsoft Corporation"),
    ("GOOGL", "Alphabet Inc."),
    ("AMZN", "Amazon.com Inc."),
    ("NVDA", "NVIDIA Corporation"),
    ("TSLA", "Tesla Inc."),
    ("META", "Meta Platforms Inc."),
    ("JPM", "JPMorgan Chase & Co."),
    ("V", "Visa Inc."),
    ("KO", "The Coca-Cola Company"),
)
AMENITIES = (
    "free wifi",
    "pool",
    "gym",
    "spa",
    "parking",
    "breakfast included",
    "airport shuttle",
    "pet friendly",
    "air conditioning",
    "restaurant",
)
INGREDIENTS = (
    "olive oil",
    "garlic",
    "onion",
    "tomatoes",
    "basil",
    "chicken breast",
    "rice",
    "lemon",
    "butter",
    "parmesan",
    "black pepper",
    "flour",
)
JOB_TITLES = (
    "Software Engineer",
    "Data Analyst",
    "Product Manager",
    "Nurse",
    "Accountant",
    "Marketing Specialist",
    "Teacher",
    "Sales Associate",
    "Graphic Designer",
    "Electrician",
)
DEPARTMENTS = ("Engineering", "Sales", "Marketing", "Finance", "Support", "Operations", "HR")
CAR_MAKES = (
    ("Toyota", "Corolla"),
    ("Honda", "Civic"),
    ("Ford", "Focus"),
    ("Tesla", "Model 3"),
    ("BMW", "3 Series"),
    ("Volkswagen", "Golf"),
    ("Hyundai", "Elantra"),
    ("Kia", "Sportage"),
)
NEWS_SOURCES = (
    "Reuters",
    "Associated Press",
    "BBC News",
    "The Guardian",
    "Bloomberg",
    "Financial Times",
    "NPR",
    "Al Jazeera",
)
TOPICS = (
    "technology",
    "markets",
    "climate",
    "health",
    "sports",
    "science",
    "travel",
    "education",
    "energy",
    "culture",
)
PAYMENT_METHODS = ("credit_card", "debit_card", "paypal", "bank_transfer", "apple_pay")
PRIORITIES = ("low", "medium", "high")
ROLES = ("admin", "member", "viewer", "editor", "owner")
TRAVEL_MODES = ("driving", "walking", "transit", "cycling")
ROOM_TYPES = ("Standard Queen", "Deluxe King", "Twin Room", "Junior Suite", "Family Room")
SEAT_CLASSES = ("economy", "premium_economy", "business", "first")
MIME_TYPES = (
    ("pdf", "application/pdf"),
    ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ("png", "image/png"),
    ("csv", "text/csv"),
    ("txt", "text/plain"),
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SENTENCE_OPENERS = (
    "A well-reviewed option",
    "Popular with recent visitors",
    "Updated this week",
    "Highly rated by customers",
    "A reliable choice",
    "Known for friendly service",
    "Recently renovated",
    "Conveniently located",
)
SENTENCE_ENDINGS = (
    "with consistent feedback on quality.",
    "close to public transport.",
    "offering good value for money.",
    "with flexible cancellation.",
    "that ships within two business days.",
    "with detailed documentation available.",
)
GENERIC_STATUSES = ("active", "pending", "completed", "in_progress", "open")
# The status a record has right after a verb of that class acted on it.
VERB_STATUS = {
    "create": "confirmed",
    "cancel": "cancelled",
    "delete": "deleted",
    "update": "updated",
    "send": "sent",
}
CREATED_STATUS = {
    "order": "processing",
    "user": "active",
    "message": "sent",
    "payment": "completed",
    "ticket": "open",
    "subscription": "active",
    "file": "uploaded",
    "review": "published",
    "job": "open",
}
